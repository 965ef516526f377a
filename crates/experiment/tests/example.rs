//! The example program builds and runs a chain file through the library.

#[path = "../examples/run_chain_file.rs"]
#[allow(dead_code)] // its `main` is the example's, not the test's
mod example;

use sfclab_experiment::ChainSource;

#[test]
fn the_example_runs_a_chain_file() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/chains/forwarders.yaml");
    example::run(&ChainSource::File(file.into()), "50ms").expect("the example runs the chain file");
}
