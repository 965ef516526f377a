//! The NF contract through both runtimes: packets an NF creates (from the pool on the
//! pool's thread, from a supply ring on another stage) and holds are conserved exactly,
//! `generated + created = received + dropped`, and reported at the NF's place.

use sfclab_core::{BatchView, Context, NetworkFunction, PacketRef, Verdicts};
use sfclab_nf::NfSpec;
use sfclab_runtime::placement::allowed_cores;
use sfclab_runtime::{PipelineSettings, Placement, RunError, RunReport, RunSettings, run_compound, run_pipeline};
use sfclab_traffic::GeneratorConfig;
use std::time::Duration;

/// Creates a 64-byte packet for every 8th packet it sees, and holds every 16th until
/// its next call.
#[derive(Default)]
struct Echo {
    seen: u64,
    held: Vec<PacketRef>,
    no_buffer: u64,
}

impl NetworkFunction for Echo {
    fn kind(&self) -> &'static str {
        "echo"
    }

    fn creates_packets(&self) -> bool {
        true
    }

    fn process(&mut self, ctx: &mut Context<'_>, batch: BatchView<'_>, verdicts: &mut Verdicts) {
        for p in self.held.drain(..) {
            ctx.emit(p, 0);
        }
        for i in 0..batch.len() {
            self.seen += 1;
            if self.seen.is_multiple_of(8) {
                match ctx.alloc() {
                    Some(mut p) => {
                        p.reset(60);
                        ctx.emit(p, 0);
                    }
                    None => self.no_buffer += 1,
                }
            }
            if self.seen.is_multiple_of(16) {
                verdicts.hold(i);
            }
        }
    }

    fn hold(&mut self, p: PacketRef) -> Result<(), PacketRef> {
        self.held.push(p);
        Ok(())
    }

    fn held(&self) -> usize {
        self.held.len()
    }

    fn release_held(&mut self, give_back: &mut dyn FnMut(PacketRef)) {
        self.held.drain(..).for_each(give_back);
    }
}

/// A broken NF: asks to hold every 100th packet, then lets its handle go (the buffer
/// never returns to the pool) and says it holds none.
#[derive(Default)]
struct Leaky {
    seen: u64,
}

impl NetworkFunction for Leaky {
    fn kind(&self) -> &'static str {
        "leaky"
    }

    fn process(&mut self, _ctx: &mut Context<'_>, batch: BatchView<'_>, verdicts: &mut Verdicts) {
        for i in 0..batch.len() {
            self.seen += 1;
            if self.seen.is_multiple_of(100) {
                verdicts.hold(i);
            }
        }
    }

    fn hold(&mut self, _lost: PacketRef) -> Result<(), PacketRef> {
        Ok(())
    }
}

fn chain() -> Vec<(String, Box<dyn NetworkFunction>)> {
    vec![
        ("fwd".into(), NfSpec::default_of("forwarder").unwrap().build()),
        ("echo".into(), Box::new(Echo::default())),
        ("noop".into(), NfSpec::default_of("noop").unwrap().build()),
    ]
}

fn run_settings() -> RunSettings {
    RunSettings {
        count: Some(64_000),
        duration: None,
        warmup: Duration::from_millis(10),
        core: allowed_cores().last().copied(),
        ..Default::default()
    }
}

fn check(r: &RunReport) {
    assert!(r.conservation.holds, "{}", r.conservation);
    assert!(r.conservation.created > 0, "{}", r.conservation);
    let echo = r.places.iter().find(|p| p.name == "echo").unwrap();
    let created = echo.counters.get("created").copied().unwrap_or(0);
    assert!(created > 0, "{echo:?}");
    let noop = r.places.iter().find(|p| p.name == "noop").unwrap();
    assert!(
        noop.packets_in > echo.packets_in,
        "created packets go on down the chain: {noop:?} {echo:?}"
    );
    // Created packets are never the window's traffic.
    assert_eq!(r.window_loss.sent, 64_000);
    assert!(r.window_loss.received <= r.window_loss.sent);
}

#[test]
fn compound_conserves_created_and_held_packets() {
    let r = run_compound(GeneratorConfig::default(), chain(), &run_settings()).unwrap();
    check(&r);
    let echo = r.places.iter().find(|p| p.name == "echo").unwrap();
    // The window: 1 in 8 created (the held ones come back on the next call).
    assert_eq!(echo.counters["created"], 8_000);
}

#[test]
fn a_pipeline_stage_creates_packets_from_its_supply() {
    let cores = allowed_cores();
    // The echo on a stage of its own, away from the generator and its pool when two
    // cores allow; else all on one core, still through the stage's supply ring.
    let (placement, generator_core) = if cores.len() >= 2 {
        ("0,1,1".to_string(), cores[0])
    } else {
        ("s_core".to_string(), cores[0])
    };
    let settings = PipelineSettings {
        run: RunSettings {
            core: None,
            pool_size: 0,
            ..run_settings()
        },
        placement: placement.parse::<Placement>().unwrap(),
        cores: cores.clone(),
        generator_core: Some(generator_core),
        flow_control: true,
        ..Default::default()
    };
    let r = run_pipeline(GeneratorConfig::default(), chain(), &settings).unwrap();
    check(&r);
}

/// What an NF loses is caught: the run ends in `RunError::Conservation` with its report,
/// the packets missing from `generated = received + dropped` exactly the buffers that
/// never came back to the pool.
#[test]
fn packets_an_nf_loses_break_conservation_and_the_run_says_so() {
    let chain = || -> Vec<(String, Box<dyn NetworkFunction>)> {
        vec![
            ("fwd".into(), NfSpec::default_of("forwarder").unwrap().build()),
            ("leaky".into(), Box::new(Leaky::default())),
        ]
    };
    let pipeline = PipelineSettings {
        run: RunSettings {
            core: None,
            pool_size: 0,
            ..run_settings()
        },
        cores: allowed_cores(),
        flow_control: true,
        ..Default::default()
    };
    for (runtime, ran) in [
        (
            "compound",
            run_compound(GeneratorConfig::default(), chain(), &run_settings()),
        ),
        ("pipeline", run_pipeline(GeneratorConfig::default(), chain(), &pipeline)),
    ] {
        match ran {
            Err(RunError::Conservation(r)) => {
                let c = &r.conservation;
                assert!(!c.holds, "{runtime}: {c}");
                let missing = c.generated + c.created - c.received - c.dropped;
                assert!(missing > 0, "{runtime}: {c}");
                assert_eq!(c.buffers_leaked, missing, "{runtime}: {c}");
            }
            Err(e) => panic!("{runtime}: another error: {e}"),
            Ok(r) => panic!(
                "{runtime}: a run that lost packets was reported whole: {}",
                r.conservation
            ),
        }
    }
}
