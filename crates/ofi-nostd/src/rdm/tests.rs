//! Engine unit tests (see domain_tests.rs for end-to-end RDM tests over loopback links).
