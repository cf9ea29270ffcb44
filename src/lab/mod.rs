//! The lab: the fault-injecting provider fakes, the runbook's cases reproduced through
//! the real worker (`repro`, `demo`), and the safety sweep that checks triage against
//! what the fakes really accepted. None of it runs in production; it is how every case
//! of the runbook is reproduced locally in seconds.

pub mod fakes;
pub mod repro;
pub mod sweep;
