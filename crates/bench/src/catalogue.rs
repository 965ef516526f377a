//! Every benchmark `sfclab bench` runs. The command line iterates [`all`] to build its
//! subcommands, run the one asked and print its schema, so a new benchmark is its own
//! file and one line here.

use crate::registry::Bench;

/// Every benchmark, in the order `sfclab bench --help` lists them.
pub fn all() -> [&'static dyn Bench; 14] {
    [
        &crate::io::BENCH,
        &crate::forward::BENCH,
        &crate::chaining::BENCH,
        &crate::memif::BENCH,
        &crate::hop::BENCH,
        &crate::placement::BENCH,
        &crate::overload::BENCH,
        &crate::ring::BENCH,
        &crate::pipeline::BENCH,
        &crate::lpm::BENCH,
        &crate::acl::BENCH,
        &crate::lpm6::BENCH,
        &crate::nfs::BENCH,
        &crate::model::BENCH,
    ]
}

/// The benchmark named `name`.
pub fn find(name: &str) -> Option<&'static dyn Bench> {
    all().into_iter().find(|b| b.name() == name)
}
