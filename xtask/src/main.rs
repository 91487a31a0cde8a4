//! Every workflow of ofi-nostd as one program (placeholder).

fn main() {}
