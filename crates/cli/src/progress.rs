//! Progress of long work on stderr: a bar with an ETA on a terminal, and a line per
//! finished step otherwise (logs, CI, `2> file`), so that no run is silent for minutes.

use std::io::IsTerminal;
use std::time::Instant;

pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    unit: &'static str,
    done: u64,
    total: u64,
    started: Instant,
}

impl Progress {
    /// `total` steps of `unit` (trials, points, runs); a guess, adjusted with `set_total`.
    pub fn new(unit: &'static str, total: usize) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(total as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template(&format!(
                    "{{spinner}} [{{elapsed_precise}}] {{bar:30}} {{pos}}/{{len}} {unit}, ETA {{eta}} {{msg}}"
                ))
                .expect("valid template"),
            );
            bar
        });
        Progress {
            bar,
            unit,
            done: 0,
            total: total as u64,
            started: Instant::now(),
        }
    }

    /// What is running now (shown on the bar; not logged line by line).
    pub fn working_on(&self, what: &str) {
        if let Some(b) = &self.bar {
            b.set_message(what.to_string());
        }
    }

    /// One step finished: `what` says which and how it went.
    pub fn step(&mut self, what: &str) {
        self.done += 1;
        self.total = self.total.max(self.done);
        match &self.bar {
            Some(b) => {
                b.set_length(self.total);
                b.set_position(self.done);
                b.set_message(what.to_string());
            }
            None => eprintln!(
                "[{:>7.1} s] {} {}/{}: {what}",
                self.started.elapsed().as_secs_f64(),
                self.unit,
                self.done,
                self.total
            ),
        }
    }

    /// Jumps to `done` of `total` (work that counts its own steps).
    pub fn at(&mut self, done: usize, total: usize, what: &str) {
        self.total = total as u64;
        if done as u64 > self.done {
            self.done = done as u64 - 1;
            self.step(what);
        }
    }

    pub fn finish(self) {
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}
