//! Ethernet ports: probe, configure one receive and one transmit queue per lcore, start,
//! and a clean shutdown.

use std::ffi::{CStr, CString, c_char};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::mbuf::{DEFAULT_DATA_ROOM, Mempool};
use crate::{DpdkLink, Eal, Error, sys};

/// Receive and transmit descriptors per queue unless configured otherwise.
pub const DEFAULT_RING: u16 = 1024;

/// Mbufs in a port's pool unless configured otherwise (2^n − 1 is what the ring-based
/// pool holds best).
pub const DEFAULT_MBUFS: u32 = 8191;

/// How long closing a memif port waits for its link to go down.
pub const MEMIF_DOWN_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a memif *client* port about to close waits for its peer to disconnect
/// first, unless the peer announced it stopped polling (see `PortShared::shutdown`).
pub const MEMIF_PEER_GRACE: Duration = Duration::from_secs(2);

/// The same wait for a memif *server* port: longer than a client's, so that when both
/// ends wait for each other the client goes first and the two never close together.
pub const MEMIF_SERVER_GRACE: Duration = Duration::from_secs(3);

/// The same wait for a memif port whose role this crate does not know (named by an EAL
/// `--vdev` option rather than hot-plugged from device arguments).
pub const MEMIF_UNKNOWN_ROLE_GRACE: Duration = Duration::from_millis(100);

/// How long a memif port whose peer disconnected first lets the EAL interrupt thread
/// finish that teardown before stopping the port itself.
pub const MEMIF_SETTLE: Duration = Duration::from_millis(50);

/// The EtherType of a memif port's last frame, sent before it waits for its peer to
/// disconnect (IEEE 802 local experimental EtherType 1).
pub const ETHERTYPE_DONE: u16 = 0x88b5;

/// What follows [`ETHERTYPE_DONE`] in that frame.
pub const DONE_MAGIC: &[u8] = b"ofi-nostd memif port done";

/// How to open a [`Port`]. Start from [`PortConfig::new`] or [`PortConfig::vdev`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PortConfig {
    /// The device name DPDK knows the port by (`net_memif0`, `0000:3b:00.0`).
    pub name: String,
    /// Device arguments to hot-plug the device with (`rte_dev_probe`) before looking it
    /// up, e.g. `net_memif0,role=server,socket=/tmp/m.sock`; `None` for a device EAL
    /// already probed (a PCI NIC, or a `--vdev` option). A device this crate probed is
    /// removed again when the port closes.
    pub devargs: Option<String>,
    /// Queue pairs; `None`: one per EAL lcore (capped at what the device offers).
    pub queues: Option<u16>,
    /// Receive descriptors per queue (adjusted to the device's limits).
    pub rx_ring: u16,
    /// Transmit descriptors per queue (adjusted to the device's limits).
    pub tx_ring: u16,
    /// Mbufs in the port's pool (receive rings, in-flight frames, link caches).
    pub mbufs: u32,
    /// Per-lcore cache of the pool.
    pub mbuf_cache: u32,
    /// Data room of each mbuf, headroom included; frames up to `data_room - 128` bytes
    /// fit in one segment, which is what the links use.
    pub data_room: u16,
    /// MTU to set (`None`: keep the device's); frames are up to 14 bytes longer, and
    /// the data room must hold them (the port refuses to open otherwise; see
    /// [`PortConfig::with_mtu`]).
    ///
    /// `net_memif` has no MTU of its own: DPDK 22.11's driver reports a fixed 1500
    /// (no `mtu_set`, `max_rx_pktlen` 1518, so ethdev refuses any larger MTU) while it
    /// carries frames of any length, copied into `bsize`-byte shared buffers (2048 by
    /// default) chained per frame. There the MTU is not given to the device: it is the
    /// MTU the links size their frames by ([`Port::mtu`]). A frame larger than `bsize`
    /// arrives as several mbufs, which the links drop: give `bsize=` too
    /// ([`PortConfig::with_mtu`] does).
    pub mtu: Option<u16>,
    /// Receive every frame, not only those to the port's MAC (ignored where the device
    /// cannot).
    pub promiscuous: bool,
}

impl PortConfig {
    /// A device EAL already knows (`--vdev` option or a PCI NIC).
    pub fn new(name: &str) -> Self {
        PortConfig {
            name: name.to_owned(),
            devargs: None,
            queues: None,
            rx_ring: DEFAULT_RING,
            tx_ring: DEFAULT_RING,
            mbufs: DEFAULT_MBUFS,
            mbuf_cache: 256,
            data_room: DEFAULT_DATA_ROOM,
            mtu: None,
            promiscuous: true,
        }
    }

    /// Frames of an `mtu`-byte IP packet: sets [`mtu`](Self::mtu), a data room that
    /// holds such a frame in one mbuf ([`data_room_for_mtu`]), and, on a hot-plugged
    /// `net_memif` device whose arguments give no `bsize=` and whose frames outgrow the
    /// driver's default 2048-byte buffers, `bsize=` of that room (less the headroom):
    /// one shared buffer per frame, one mbuf per buffer. Both ends of a memif
    /// connection need the same.
    pub fn with_mtu(mut self, mtu: u16) -> Self {
        self.mtu = Some(mtu);
        self.data_room = data_room_for_mtu(mtu);
        if let Some(args) = &self.devargs {
            self.devargs = Some(memif_args_for_room(args, self.data_room));
        }
        self
    }

    /// A virtual device hot-plugged when the port opens: `name` like `net_memif7`
    /// (unique in the process), `args` its comma-separated device arguments.
    pub fn vdev(name: &str, args: &str) -> Self {
        let mut c = Self::new(name);
        c.devargs = Some(if args.is_empty() {
            name.to_owned()
        } else {
            format!("{name},{args}")
        });
        c
    }
}

/// State of a port's link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkStatus {
    /// The link is up.
    pub up: bool,
    /// Speed in Mbit/s (0 when unknown).
    pub speed_mbps: u32,
}

/// The port's own counters (`rte_eth_stats_get`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PortStats {
    /// Frames received.
    pub ipackets: u64,
    /// Frames sent.
    pub opackets: u64,
    /// Bytes received.
    pub ibytes: u64,
    /// Bytes sent.
    pub obytes: u64,
    /// Frames the device dropped for lack of receive descriptors.
    pub imissed: u64,
    /// Receive errors.
    pub ierrors: u64,
    /// Transmit errors.
    pub oerrors: u64,
    /// Receive mbuf allocation failures.
    pub rx_nombuf: u64,
}

/// What the links of a port share: the port stays open (and its pool alive) while a
/// link or the [`Port`] handle exists.
#[derive(Debug)]
pub(crate) struct PortShared {
    pub(crate) id: u16,
    pub(crate) name: String,
    pub(crate) driver: String,
    pub(crate) queues: u16,
    pub(crate) claimed: Vec<AtomicBool>,
    pub(crate) mac: [u8; 6],
    pub(crate) mtu: u16,
    /// Declared after everything that may hold its mbufs: dropped last.
    pub(crate) mempool: Mempool,
    device: Option<DeviceHandle>,
    /// How long closing waits for the memif peer to disconnect first:
    /// [`MEMIF_PEER_GRACE`] for a client, [`MEMIF_SERVER_GRACE`] for a server (see
    /// `PortShared::shutdown`).
    memif_grace: Duration,
    /// The memif peer sent its last frame ([`ETHERTYPE_DONE`]): it polls no more.
    pub(crate) peer_done: AtomicBool,
    closed: AtomicBool,
}

/// An `rte_device` this crate hot-plugged (removed on close).
#[derive(Debug)]
struct DeviceHandle(*mut sys::rte_device);

// SAFETY: the pointer is only passed to rte_dev_remove, once, from whichever thread
// closes the port; DPDK's hotplug calls take their own lock.
unsafe impl Send for DeviceHandle {}
// SAFETY: no method reads through the pointer; see Send.
unsafe impl Sync for DeviceHandle {}

/// An Ethernet port, started, with one receive and one transmit queue per lcore (or as
/// configured); [`Port::link`] gives the [`DpdkLink`] of one queue pair.
///
/// The port closes when this handle and every link of it are gone, or with
/// [`Port::close`]: it is stopped, a memif port waits for its link to go down (the
/// driver's control channel must be idle before the device is closed), then it is
/// closed and, if this crate hot-plugged it, removed.
#[derive(Debug)]
pub struct Port {
    pub(crate) shared: Arc<PortShared>,
}

/// The driver name of `net_af_xdp` ports (`rte_eth_dev_info::driver_name`).
const AF_XDP_DRIVER: &str = "net_af_xdp";

/// Pools need process-unique names.
static POOL_COUNTER: AtomicU32 = AtomicU32::new(0);

impl Port {
    /// Probe (if `cfg.devargs`), configure and start the port.
    pub fn open(_eal: &'static Eal, cfg: &PortConfig) -> Result<Port, Error> {
        let cname = CString::new(cfg.name.as_str())
            .map_err(|_| Error::InvalidArgument(format!("port name {:?}", cfg.name)))?;
        let mut device = None;
        if let Some(devargs) = &cfg.devargs {
            let cargs = CString::new(devargs.as_str())
                .map_err(|_| Error::InvalidArgument(format!("devargs {devargs:?}")))?;
            // SAFETY: EAL is initialised; cargs is a valid C string DPDK copies.
            let ret = unsafe { sys::rte_dev_probe(cargs.as_ptr()) };
            Error::check("rte_dev_probe", ret)?;
        }
        let mut id = 0u16;
        // SAFETY: valid C string and out pointer.
        let ret = unsafe { sys::rte_eth_dev_get_port_by_name(cname.as_ptr(), &mut id) };
        if ret != 0 {
            return Err(Error::NoSuchPort(cfg.name.clone()));
        }
        if cfg.devargs.is_some() {
            // SAFETY: id is a valid port; returns its device or NULL.
            let dev = unsafe { sys::shim_port_device(id) };
            device = (!dev.is_null()).then_some(DeviceHandle(dev));
        }
        match Self::setup(id, cfg) {
            Ok(mut shared) => {
                shared.device = device;
                shared.memif_grace = match cfg.devargs.as_deref() {
                    Some(a) if memif_client_role(a) => MEMIF_PEER_GRACE,
                    Some(_) => MEMIF_SERVER_GRACE,
                    None => MEMIF_UNKNOWN_ROLE_GRACE,
                };
                Ok(Port {
                    shared: Arc::new(shared),
                })
            }
            Err(e) => {
                // `setup` closed the port; remove the device if we plugged it in.
                if let Some(d) = device {
                    // SAFETY: the device we hot-plugged, its port closed; removed once.
                    unsafe { sys::rte_dev_remove(d.0) };
                }
                Err(e)
            }
        }
    }

    /// Configure and start port `id`; on failure the port is stopped and closed before
    /// its pool is freed.
    fn setup(id: u16, cfg: &PortConfig) -> Result<PortShared, Error> {
        let close = || {
            // SAFETY: id is a valid port nobody drives yet; stop and close accept any
            // state (errors ignored: this is the failure path).
            unsafe {
                sys::rte_eth_dev_stop(id);
                sys::rte_eth_dev_close(id);
            }
        };
        let (queues, driver, socket) = match Self::queues_for(id, cfg) {
            Ok(q) => q,
            Err(e) => {
                close();
                return Err(e);
            }
        };
        if let Some(mtu) = cfg.mtu {
            let frame = usize::from(mtu) + wire::frame::ETH_HEADER_LEN;
            let room = usize::from(cfg.data_room.saturating_sub(crate::mbuf::HEADROOM));
            if frame > room {
                close();
                return Err(Error::InvalidArgument(format!(
                    "MTU {mtu} needs frames of {frame} bytes; mbufs of data room {} hold \
                     {room} (see PortConfig::with_mtu)",
                    cfg.data_room
                )));
            }
        }
        let memif = driver.contains("memif");
        let n = POOL_COUNTER.fetch_add(1, Ordering::Relaxed);
        let mempool = Eal::get()
            .ok_or_else(|| Error::InvalidArgument("EAL not initialised".into()))
            .and_then(|eal| {
                // net_af_xdp registers the pool as its UMEM assuming packed mbufs
                // (see `Mempool::new_packed`).
                let create = if driver == AF_XDP_DRIVER {
                    Mempool::new_packed
                } else {
                    Mempool::new
                };
                create(
                    eal,
                    &format!("dpdk_p{id}_{n}"),
                    cfg.mbufs,
                    cfg.mbuf_cache,
                    cfg.data_room,
                    socket,
                )
            });
        let mempool = match mempool {
            Ok(m) => m,
            Err(e) => {
                close();
                return Err(e);
            }
        };
        match Self::start(id, cfg, queues, socket, &mempool, memif) {
            Ok((mac, mtu)) => Ok(PortShared {
                id,
                name: cfg.name.clone(),
                driver,
                queues,
                claimed: (0..queues).map(|_| AtomicBool::new(false)).collect(),
                mac,
                mtu,
                mempool,
                device: None,
                memif_grace: MEMIF_UNKNOWN_ROLE_GRACE,
                peer_done: AtomicBool::new(false),
                closed: AtomicBool::new(false),
            }),
            Err(e) => {
                close();
                drop(mempool);
                Err(e)
            }
        }
    }

    /// Queue pairs to configure, the driver's name and the port's NUMA socket.
    fn queues_for(id: u16, cfg: &PortConfig) -> Result<(u16, String, i32), Error> {
        let mut info = sys::rte_eth_dev_info::default();
        // SAFETY: valid port id and out pointer.
        Error::check("rte_eth_dev_info_get", unsafe {
            sys::rte_eth_dev_info_get(id, &mut info)
        })?;
        let driver = if info.driver_name.is_null() {
            String::new()
        } else {
            // SAFETY: the driver name is a static NUL-terminated string of the driver.
            unsafe { CStr::from_ptr(info.driver_name) }
                .to_string_lossy()
                .into_owned()
        };
        // SAFETY: EAL is initialised.
        let lcores = u16::try_from(unsafe { sys::rte_lcore_count() }).unwrap_or(u16::MAX);
        let queues = cfg
            .queues
            .unwrap_or(lcores)
            .min(info.max_rx_queues)
            .min(info.max_tx_queues)
            .max(1);
        if cfg.queues.is_some_and(|q| q > queues || q == 0) {
            return Err(Error::InvalidArgument(format!(
                "{} offers {} rx and {} tx queues, {:?} asked",
                cfg.name, info.max_rx_queues, info.max_tx_queues, cfg.queues
            )));
        }
        // SAFETY: valid port id.
        let socket = unsafe { sys::rte_eth_dev_socket_id(id) };
        Ok((queues, driver, socket))
    }

    /// Configure the queues, start, read MAC and MTU (`memif`: the configured MTU is
    /// the links', not the device's; see [`PortConfig::mtu`]).
    fn start(
        id: u16,
        cfg: &PortConfig,
        queues: u16,
        socket: i32,
        mempool: &Mempool,
        memif: bool,
    ) -> Result<([u8; 6], u16), Error> {
        let socket_u = u32::try_from(socket).unwrap_or(u32::MAX); // SOCKET_ID_ANY
        let mut conf = sys::rte_eth_conf::default();
        if let Some(mtu) = cfg.mtu.filter(|_| !memif) {
            conf.rxmode.mtu = u32::from(mtu);
        }
        // SAFETY: valid port id; conf is a fully initialised (zeroed) rte_eth_conf.
        Error::check("rte_eth_dev_configure", unsafe {
            sys::rte_eth_dev_configure(id, queues, queues, &conf)
        })?;
        let (mut rxd, mut txd) = (cfg.rx_ring, cfg.tx_ring);
        // SAFETY: valid port id and out pointers.
        Error::check("rte_eth_dev_adjust_nb_rx_tx_desc", unsafe {
            sys::rte_eth_dev_adjust_nb_rx_tx_desc(id, &mut rxd, &mut txd)
        })?;
        for q in 0..queues {
            // SAFETY: valid port and queue ids; NULL conf means the device's defaults;
            // the pool outlives the port (PortShared drops it after closing, setup's
            // failure path closes before dropping it).
            Error::check("rte_eth_rx_queue_setup", unsafe {
                sys::rte_eth_rx_queue_setup(
                    id,
                    q,
                    rxd,
                    socket_u,
                    std::ptr::null(),
                    mempool.as_ptr(),
                )
            })?;
            // SAFETY: valid port and queue ids; NULL conf means the device's defaults.
            Error::check("rte_eth_tx_queue_setup", unsafe {
                sys::rte_eth_tx_queue_setup(id, q, txd, socket_u, std::ptr::null())
            })?;
        }
        // SAFETY: valid, configured port.
        Error::check("rte_eth_dev_start", unsafe { sys::rte_eth_dev_start(id) })?;
        if cfg.promiscuous {
            // Not every device can (memif has no filter anyway): best effort.
            // SAFETY: valid, started port.
            let _ = unsafe { sys::rte_eth_promiscuous_enable(id) };
        }
        let mut mac = sys::rte_ether_addr::default();
        // SAFETY: valid port and out pointer.
        Error::check("rte_eth_macaddr_get", unsafe {
            sys::rte_eth_macaddr_get(id, &mut mac)
        })?;
        let mut mtu = 1500u16;
        // SAFETY: valid port and out pointer; on failure mtu keeps the Ethernet default.
        let _ = unsafe { sys::rte_eth_dev_get_mtu(id, &mut mtu) };
        if memif && let Some(m) = cfg.mtu {
            mtu = m;
        }
        Ok((mac.addr_bytes, mtu))
    }

    /// The DPDK port id.
    pub fn id(&self) -> u16 {
        self.shared.id
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The driver's name (`net_memif`, `net_af_packet`, ...).
    pub fn driver(&self) -> &str {
        &self.shared.driver
    }

    /// Queue pairs configured.
    pub fn queues(&self) -> u16 {
        self.shared.queues
    }

    /// The port's MAC address (`rte_eth_macaddr_get`).
    pub fn mac(&self) -> [u8; 6] {
        self.shared.mac
    }

    /// The port's MTU (IP packet size; frames are up to 14 bytes longer).
    pub fn mtu(&self) -> u16 {
        self.shared.mtu
    }

    /// The port's mbuf pool (for leak checks: [`Mempool::in_use`]).
    pub fn mempool(&self) -> &Mempool {
        &self.shared.mempool
    }

    /// Whether the memif peer announced, with its last frame, that it polls no more
    /// (it closes, or waits for us to disconnect first): this port then closes at
    /// once. Learnt by this port's links as they receive.
    pub fn peer_done(&self) -> bool {
        self.shared.peer_done.load(Ordering::Acquire)
    }

    /// Current link state, without waiting.
    pub fn link_status(&self) -> Result<LinkStatus, Error> {
        self.shared.link_status()
    }

    /// Wait until the link is up (memif: until the peer connected).
    pub fn wait_link_up(&self, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        while !self.link_status()?.up {
            if Instant::now() >= deadline {
                return Err(Error::Timeout(format!(
                    "link of {} not up after {timeout:?}",
                    self.shared.name
                )));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// The device's counters.
    pub fn stats(&self) -> Result<PortStats, Error> {
        self.shared.stats()
    }

    /// The link driving queue pair `queue` (each queue pair has at most one link at a
    /// time; give each lcore its own).
    pub fn link(&self, queue: u16) -> Result<DpdkLink, Error> {
        let busy = Error::QueueBusy {
            port: self.shared.id,
            queue,
        };
        let slot = self.shared.claimed.get(usize::from(queue)).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "queue {queue}: {} has {} queue pairs",
                self.shared.name, self.shared.queues
            ))
        })?;
        slot.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| busy)?;
        Ok(DpdkLink::new(Arc::clone(&self.shared), queue))
    }

    /// Stop and close the port now, reporting errors (dropping the handle does the same
    /// silently). Fails with [`Error::PortInUse`] while links exist: the port then
    /// closes when the last of them is dropped.
    pub fn close(self) -> Result<(), Error> {
        match Arc::try_unwrap(self.shared) {
            Ok(shared) => shared.shutdown(),
            Err(shared) => Err(Error::PortInUse(shared.name.clone())),
        }
    }
}

impl PortShared {
    /// The device's counters (see [`Port::stats`]).
    pub(crate) fn stats(&self) -> Result<PortStats, Error> {
        let mut s = sys::rte_eth_stats::default();
        // SAFETY: valid port (open while self exists) and out pointer.
        Error::check("rte_eth_stats_get", unsafe {
            sys::rte_eth_stats_get(self.id, &mut s)
        })?;
        Ok(PortStats {
            ipackets: s.ipackets,
            opackets: s.opackets,
            ibytes: s.ibytes,
            obytes: s.obytes,
            imissed: s.imissed,
            ierrors: s.ierrors,
            oerrors: s.oerrors,
            rx_nombuf: s.rx_nombuf,
        })
    }

    pub(crate) fn link_status(&self) -> Result<LinkStatus, Error> {
        let mut speed = 0u32;
        // SAFETY: valid port and out pointer.
        let ret = unsafe { sys::shim_link_status(self.id, &mut speed) };
        Error::check("rte_eth_link_get_nowait", ret)?;
        Ok(LinkStatus {
            up: ret == 1,
            speed_mbps: speed,
        })
    }

    pub(crate) fn is_memif(&self) -> bool {
        self.driver.contains("memif")
    }

    /// Stop, (memif) wait for link down, close, remove what we probed; once.
    fn shutdown(&self) -> Result<(), Error> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if self.is_memif() && !self.peer_done.load(Ordering::Acquire) {
            // DPDK 22.11's memif tears a connection down in the EAL interrupt thread
            // when the peer disconnects, unsynchronised with anything here: with both
            // ends closing at once it crashed that thread (seen in CI), and a burst
            // of ours under way when it unmaps the rings reads unmapped memory (seen:
            // a server polling in its linger while the client exited). So an end
            // that is done tells its peer (a last frame) and waits, without polling,
            // for the peer to disconnect; an end that got that frame while it still
            // polled closes at once, when nothing of either end polls any more. Two
            // ends that both wait (each closed before the other's frame came) part
            // by role: the client's grace is the shorter. A port of unknown role
            // keeps a short grace.
            self.send_done();
            let deadline = Instant::now() + self.memif_grace;
            let mut up = true;
            while Instant::now() < deadline {
                up = self.link_status().is_ok_and(|s| s.up);
                if !up {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            if !up {
                // The teardown marks the link down first and frees the connection's
                // state after; a stop meanwhile freed some of it twice ("EAL: Error:
                // Invalid memory", seen). Let the interrupt thread finish.
                std::thread::sleep(MEMIF_SETTLE);
            }
        }
        // SAFETY: the port is open and no link exists (links hold the Arc we are
        // dropped from or unwrapped out of), so no burst call can race with stopping.
        let stopped = Error::check("rte_eth_dev_stop", unsafe {
            sys::rte_eth_dev_stop(self.id)
        });
        let mut down = Ok(());
        if self.is_memif() {
            let deadline = Instant::now() + MEMIF_DOWN_TIMEOUT;
            loop {
                match self.link_status() {
                    Ok(s) if s.up => {}
                    _ => break,
                }
                if Instant::now() >= deadline {
                    down = Err(Error::Timeout(format!(
                        "memif link of {} still up {MEMIF_DOWN_TIMEOUT:?} after stop",
                        self.name
                    )));
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // SAFETY: the port is stopped and unused; it is closed once (the flag above).
        let closed = Error::check("rte_eth_dev_close", unsafe {
            sys::rte_eth_dev_close(self.id)
        });
        let mut removed = Ok(0);
        if let Some(d) = &self.device {
            // SAFETY: the device we hot-plugged, its port closed; removed once.
            removed = Error::check("rte_dev_remove", unsafe { sys::rte_dev_remove(d.0) });
        }
        stopped.and(down).and(closed).and(removed).map(drop)
    }
}

impl PortShared {
    /// Sends the memif peer our last frame ([`ETHERTYPE_DONE`]) on queue 0: no link
    /// exists any more (each holds the Arc being dropped), so nothing else uses it.
    /// Best effort: a frame the driver refuses is freed, and the peer's grace applies.
    fn send_done(&self) {
        let Some(mut m) = self.mempool.alloc() else {
            return;
        };
        let frame = done_frame(self.mac);
        let Some(buf) = m.append(frame.len() as u16) else {
            return;
        };
        buf.copy_from_slice(&frame);
        let mut raw = [m.into_raw().as_ptr()];
        // SAFETY: the port is started and no link drives queue 0 (see above); the
        // driver takes the mbuf we own when it returns 1, else it stays ours.
        let n = unsafe { sys::shim_tx_burst(self.id, 0, raw.as_mut_ptr(), 1) };
        if n == 0 {
            // SAFETY: refused, so still ours; freed once.
            unsafe { sys::shim_pktmbuf_free(raw[0]) };
        }
    }
}

/// The last frame of a memif port whose MAC is `mac` (broadcast: the peer's MAC may
/// never have been learnt).
pub(crate) fn done_frame(mac: [u8; 6]) -> [u8; 60] {
    let mut f = [0u8; 60];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&ETHERTYPE_DONE.to_be_bytes());
    f[14..14 + DONE_MAGIC.len()].copy_from_slice(DONE_MAGIC);
    f
}

/// Whether `frame` is a memif port's last frame.
pub(crate) fn is_done_frame(frame: &[u8]) -> bool {
    frame.get(12..14) == Some(&ETHERTYPE_DONE.to_be_bytes()[..])
        && frame.get(14..14 + DONE_MAGIC.len()) == Some(DONE_MAGIC)
}

impl Drop for PortShared {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// Whether memif device arguments choose the client role (the driver's default is
/// server).
fn memif_client_role(devargs: &str) -> bool {
    devargs
        .split(',')
        .any(|kv| kv.trim().eq_ignore_ascii_case("role=client"))
}

/// The memif driver's default `bsize` (`ETH_MEMIF_DEFAULT_PKT_BUFFER_SIZE`).
pub const MEMIF_DEFAULT_BSIZE: u16 = 2048;

/// The data room (headroom included) of mbufs that hold the frame of an `mtu`-byte IP
/// packet in one segment: [`DEFAULT_DATA_ROOM`] up to an MTU of 1500 or so, else the
/// frame rounded up to KiB plus the headroom (MTU 9000: 9216 + 128).
pub fn data_room_for_mtu(mtu: u16) -> u16 {
    let frame = u32::from(mtu) + wire::frame::ETH_HEADER_LEN as u32;
    let room = frame.div_ceil(1024) * 1024 + u32::from(crate::mbuf::HEADROOM);
    u16::try_from(room)
        .unwrap_or(u16::MAX)
        .max(DEFAULT_DATA_ROOM)
}

/// `devargs` of a `net_memif` device with `bsize=` of mbufs of `data_room` appended
/// when they give none and that room outgrows the driver's default buffers; any
/// other device's, or ones that give `bsize=`, unchanged.
fn memif_args_for_room(devargs: &str, data_room: u16) -> String {
    let bsize = data_room.saturating_sub(crate::mbuf::HEADROOM);
    let memif = devargs.starts_with("net_memif");
    let given = devargs
        .split(',')
        .any(|kv| kv.trim().to_ascii_lowercase().starts_with("bsize="));
    if memif && !given && bsize > MEMIF_DEFAULT_BSIZE {
        format!("{devargs},bsize={bsize}")
    } else {
        devargs.to_owned()
    }
}

/// The name DPDK gives port `id`, if it exists.
pub fn port_name(id: u16) -> Option<String> {
    let mut buf = [0 as c_char; 64]; // RTE_ETH_NAME_MAX_LEN
    // SAFETY: the buffer holds RTE_ETH_NAME_MAX_LEN bytes, as the call requires.
    let ret = unsafe { sys::rte_eth_dev_get_name_by_port(id, buf.as_mut_ptr()) };
    if ret != 0 {
        return None;
    }
    // SAFETY: on success the buffer holds a NUL-terminated name.
    Some(
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::{
        DEFAULT_DATA_ROOM, DONE_MAGIC, PortConfig, data_room_for_mtu, done_frame, is_done_frame,
        memif_args_for_room, memif_client_role,
    };

    #[test]
    fn a_jumbo_mtu_gets_mbufs_and_memif_buffers_that_hold_a_frame() {
        assert_eq!(data_room_for_mtu(1500), DEFAULT_DATA_ROOM);
        assert_eq!(data_room_for_mtu(576), DEFAULT_DATA_ROOM);
        assert_eq!(data_room_for_mtu(9000), 9216 + 128);
        assert_eq!(data_room_for_mtu(u16::MAX), u16::MAX);
        let c = PortConfig::vdev("net_memif0", "role=server,socket=/tmp/m.sock").with_mtu(9000);
        assert_eq!(c.mtu, Some(9000));
        assert_eq!(c.data_room, 9344);
        assert_eq!(
            c.devargs.as_deref(),
            Some("net_memif0,role=server,socket=/tmp/m.sock,bsize=9216")
        );
        // MTU 1500 keeps the driver's default buffers; a given bsize is kept; other
        // devices get no bsize.
        let c = PortConfig::vdev("net_memif0", "role=client").with_mtu(1500);
        assert_eq!(c.devargs.as_deref(), Some("net_memif0,role=client"));
        assert_eq!(
            memif_args_for_room("net_memif1,BSIZE=16384", 9344),
            "net_memif1,BSIZE=16384"
        );
        assert_eq!(
            memif_args_for_room("net_af_packet0,iface=v0", 9344),
            "net_af_packet0,iface=v0"
        );
        assert_eq!(PortConfig::new("0000:3b:00.0").with_mtu(9000).devargs, None);
    }

    #[test]
    fn a_last_frame_is_told_apart_from_any_other() {
        let f = done_frame([2, 0, 0, 0, 0, 7]);
        assert!(is_done_frame(&f));
        assert_eq!(&f[..6], &[0xff; 6]);
        assert_eq!(&f[6..12], &[2, 0, 0, 0, 0, 7]);
        // Cut short, another EtherType, or another payload: not one.
        assert!(!is_done_frame(&f[..14 + DONE_MAGIC.len() - 1]));
        let mut g = f;
        g[13] ^= 1;
        assert!(!is_done_frame(&g));
        let mut g = f;
        g[14] ^= 1;
        assert!(!is_done_frame(&g));
        assert!(!is_done_frame(&[]));
    }

    #[test]
    fn the_memif_role_comes_from_the_device_arguments() {
        assert!(memif_client_role(
            "net_memif0,role=client,id=0,socket=/tmp/m.sock"
        ));
        assert!(memif_client_role("net_memif1, role=CLIENT"));
        assert!(!memif_client_role(
            "net_memif0,role=server,socket=/tmp/m.sock"
        ));
        // The driver's default role is server.
        assert!(!memif_client_role(
            "net_memif0,socket=/tmp/role=client.sock"
        ));
        assert!(!memif_client_role("net_memif0"));
    }
}
