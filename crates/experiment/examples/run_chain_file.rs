//! Runs a chain file through sfclab's library and prints what each place did:
//! `cargo run --release -p sfclab-experiment --example run_chain_file -- examples/chains/forwarders.yaml`
//! (no file: the embedded default chain).

use sfclab_experiment::{ChainSource, Experiment, Settings};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let source = std::env::args()
        .nth(1)
        .map_or(ChainSource::Default, |f| ChainSource::File(f.into()));
    run(&source, "1s")
}

/// Loads `source` with a window of `duration` (as `--duration` would set it), runs it and
/// prints the throughput, each place's packets in, out and dropped, and conservation.
pub fn run(source: &ChainSource, duration: &str) -> Result<(), Box<dyn std::error::Error>> {
    let experiment = Experiment::load(source, &Settings::default().with("duration", duration)?)?;
    let report = experiment.run()?.into_measured();
    println!("{}: {:.2} Mpps", experiment.name, report.mpps);
    for p in &report.places {
        println!(
            "  {:<12} in {:>12} out {:>12} dropped {:>10}",
            p.name, p.packets_in, p.packets_out, p.dropped
        );
    }
    println!("conservation: {}", report.conservation);
    Ok(())
}
