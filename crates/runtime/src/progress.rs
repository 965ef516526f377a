//! How long work (a run's repetitions, a search's trials, a benchmark's rounds) tells how
//! far it got: one typed stream of [`Step`]s, whoever does the work and whoever shows it.

/// One thing a long piece of work says as it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step<'a> {
    /// `done` of `total` steps are finished and `what` runs now: shown while it lasts,
    /// not a line of its own.
    Working { done: usize, total: usize, what: &'a str },
    /// Step `done` of `total` just finished; `what` says which and how it went: a line
    /// of the work's log.
    Finished { done: usize, total: usize, what: &'a str },
    /// Something went wrong that the work carries on past (a latency level that could
    /// not be measured, a peer's note): shown as it is.
    Warning(&'a str),
}

/// Where long work tells its [`Step`]s, counting them: [`Progress::plan`] says how many
/// are expected, [`Progress::working`] what runs now, [`Progress::finished`] that one
/// ended. `total` only grows past the plan (a step taken again adds to it).
pub struct Progress<'a> {
    tell: Box<dyn FnMut(Step<'_>) + 'a>,
    done: usize,
    total: usize,
}

impl<'a> Progress<'a> {
    /// Progress told to `tell`.
    pub fn new(tell: impl FnMut(Step<'_>) + 'a) -> Progress<'a> {
        Progress {
            tell: Box::new(tell),
            done: 0,
            total: 0,
        }
    }

    /// Progress told to no one (a library caller that does not show it).
    pub fn quiet() -> Progress<'static> {
        Progress::new(|_| {})
    }

    /// The work expects `total` steps in all (a plan, or a revised count).
    pub fn plan(&mut self, total: usize) {
        self.total = total.max(self.done);
    }

    /// Adds `more` steps to the plan (a step to take again, a round that grew).
    pub fn plan_more(&mut self, more: usize) {
        self.total += more;
    }

    /// A step finished without a word of its own: the next [`Progress::working`] shows it.
    pub fn advance(&mut self) {
        self.done += 1;
        self.total = self.total.max(self.done);
    }

    /// `what` runs now.
    pub fn working(&mut self, what: &str) {
        (self.tell)(Step::Working {
            done: self.done,
            total: self.total,
            what,
        });
    }

    /// Steps told as they start: `what` runs now, shown with the steps before it done,
    /// and counted done from the next step on.
    pub fn next(&mut self, what: &str) {
        self.working(what);
        self.advance();
    }

    /// A step finished; `what` says which and how it went.
    pub fn finished(&mut self, what: &str) {
        self.done += 1;
        self.total = self.total.max(self.done);
        (self.tell)(Step::Finished {
            done: self.done,
            total: self.total,
            what,
        });
    }

    /// Work that counts its own steps: `done` of `total` are finished and `what` runs now.
    pub fn at(&mut self, done: usize, total: usize, what: &str) {
        self.done = done;
        self.total = total.max(done);
        self.working(what);
    }

    /// A part of this work that counts (and plans) its own steps: each told here, after
    /// the steps done before it and within this work's plan, `label` before what it
    /// says.
    pub fn part<'p>(&'p mut self, label: &'p str) -> Progress<'p> {
        let base = self.done;
        Progress::new(move |step| {
            let named = |what: &str| format!("{label}: {what}");
            match step {
                Step::Working { done, what, .. } => {
                    self.done = base + done;
                    self.total = self.total.max(self.done);
                    self.working(&named(what));
                }
                Step::Finished { done, what, .. } => {
                    self.done = base + done.saturating_sub(1);
                    self.finished(&named(what));
                }
                Step::Warning(what) => self.warn(what),
            }
        })
    }

    /// Something went wrong that the work carries on past.
    pub fn warn(&mut self, what: &str) {
        (self.tell)(Step::Warning(what));
    }

    /// Steps finished so far.
    pub fn done(&self) -> usize {
        self.done
    }

    /// Steps expected in all.
    pub fn total(&self) -> usize {
        self.total
    }
}

impl std::fmt::Debug for Progress<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("done", &self.done)
            .field("total", &self.total)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(work: impl FnOnce(&mut Progress)) -> Vec<String> {
        let mut seen = Vec::new();
        let mut progress = Progress::new(|step: Step| seen.push(format!("{step:?}")));
        work(&mut progress);
        drop(progress);
        seen
    }

    #[test]
    fn finished_steps_count_and_the_total_grows_past_the_plan() {
        let seen = recorded(|p| {
            p.plan(2);
            p.working("a");
            p.finished("a ran");
            p.finished("b ran");
            p.finished("c ran");
            p.warn("odd");
        });
        assert_eq!(
            seen,
            [
                r#"Working { done: 0, total: 2, what: "a" }"#,
                r#"Finished { done: 1, total: 2, what: "a ran" }"#,
                r#"Finished { done: 2, total: 2, what: "b ran" }"#,
                r#"Finished { done: 3, total: 3, what: "c ran" }"#,
                r#"Warning("odd")"#,
            ]
        );
    }

    #[test]
    fn work_that_counts_its_own_steps_sets_both_counts() {
        let seen = recorded(|p| {
            p.at(3, 10, "round 2");
            p.plan_more(2);
            p.finished("x");
            assert_eq!((p.done(), p.total()), (4, 12));
        });
        assert_eq!(seen[0], r#"Working { done: 3, total: 10, what: "round 2" }"#);
    }

    #[test]
    fn a_part_that_plans_its_own_steps_is_counted_within_the_whole() {
        let seen = recorded(|p| {
            p.plan(10);
            p.finished("first");
            {
                let mut part = p.part("calibrating");
                part.plan(3);
                part.working("x");
                part.finished("x ran");
                part.next("y");
                part.finished("z ran");
            }
            assert_eq!((p.done(), p.total()), (4, 10));
        });
        assert_eq!(
            seen[1..],
            [
                r#"Working { done: 1, total: 10, what: "calibrating: x" }"#,
                r#"Finished { done: 2, total: 10, what: "calibrating: x ran" }"#,
                r#"Working { done: 2, total: 10, what: "calibrating: y" }"#,
                r#"Finished { done: 4, total: 10, what: "calibrating: z ran" }"#,
            ]
        );
    }
}
