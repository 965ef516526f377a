//! Progress of long work on stderr: a bar with an ETA on a terminal, and a line per
//! finished step otherwise (logs, CI, `2> file`), so that no run is silent for minutes.
//! The work tells its [`Step`]s through a [`Progress`]; this only shows them.

use std::io::IsTerminal;
use std::time::Instant;

use sfclab_runtime::{Progress, Step};

/// Runs `work` with its progress shown on stderr, counted in `unit` (runs, trials,
/// repetitions).
pub fn shown<T>(unit: &'static str, work: impl FnOnce(&mut Progress) -> T) -> T {
    let mut shown = Shown::new(unit);
    let result = {
        let mut progress = Progress::new(|step| shown.show(step));
        work(&mut progress)
    };
    shown.finish();
    result
}

/// The bar, or the log lines, of one piece of work.
struct Shown {
    bar: Option<indicatif::ProgressBar>,
    unit: &'static str,
    /// The last step logged (without a terminal, a line is logged each time it grows).
    logged: usize,
    started: Instant,
}

impl Shown {
    fn new(unit: &'static str) -> Shown {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template(&format!(
                    "{{spinner}} [{{elapsed_precise}}] {{bar:30}} {{pos}}/{{len}} {unit}, ETA {{eta}} {{msg}}"
                ))
                .expect("valid template"),
            );
            bar
        });
        Shown {
            bar,
            unit,
            logged: 0,
            started: Instant::now(),
        }
    }

    fn show(&mut self, step: Step) {
        match step {
            Step::Working { done, total, what } | Step::Finished { done, total, what } => match &self.bar {
                Some(b) => {
                    b.set_length(total as u64);
                    b.set_position(done as u64);
                    b.set_message(what.to_string());
                }
                // Work that is only under way is not a line; a step that finished is,
                // once.
                None if done > self.logged => {
                    self.logged = done;
                    eprintln!(
                        "[{:>7.1} s] {} {done}/{total}: {what}",
                        self.started.elapsed().as_secs_f64(),
                        self.unit,
                    );
                }
                None => {}
            },
            Step::Warning(what) => match &self.bar {
                Some(b) => b.suspend(|| eprintln!("{what}")),
                None => eprintln!("{what}"),
            },
        }
    }

    fn finish(self) {
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}
