//! Why a run forwarded (almost) nothing, in one line: the first NF that dropped nearly
//! every packet reaching it, its main reason, and the fix its registry entry names
//! (secure defaults such as a firewall's deny and a router without routes are kept; a
//! user who meets them is told which key to set).

use sfclab_runtime::{PlaceReport, Role, RunReport};

/// An NF dropping at least this share of what reached it is "dropping nearly everything".
const NEARLY_ALL: f64 = 0.99;

/// The line for the first NF of `report` that dropped nearly all it was given, if any.
pub fn nearly_all_dropped(report: &RunReport) -> Option<String> {
    report.places.iter().find_map(diagnose)
}

fn diagnose(place: &PlaceReport) -> Option<String> {
    if place.role != Role::Nf || place.packets_in == 0 {
        return None;
    }
    let share = place.dropped as f64 / place.packets_in as f64;
    if share < NEARLY_ALL {
        return None;
    }
    let (reason, _) = place.drops.iter().max_by_key(|(_, n)| **n)?;
    let fix = sfclab_nf::registry::find(&place.kind).and_then(|t| t.fix_for(reason));
    Some(format!(
        "{} dropped {:.0}% of what reached it ({reason}){}",
        place.name,
        share * 100.0,
        fix.map_or(String::new(), |f| format!(": {f}"))
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ChainSource, Experiment, Settings};
    use std::time::Duration;

    fn run(chain: &str) -> RunReport {
        let settings = Settings::default()
            .duration(Duration::from_millis(50))
            .warmup(Duration::ZERO);
        Experiment::load(&ChainSource::Shorthand(chain.into()), &settings)
            .unwrap()
            .run()
            .unwrap()
            .into_measured()
    }

    #[test]
    fn a_default_firewall_or_router_is_named_with_the_key_to_set() {
        let line = nearly_all_dropped(&run("forwarder -> firewall -> router")).unwrap();
        assert!(
            line.starts_with("firewall dropped 100% of what reached it (acl-deny): its default is deny"),
            "{line}"
        );
        assert!(
            line.contains("rules:") && line.contains("examples/chains/firewall.yaml"),
            "{line}"
        );
        let line = nearly_all_dropped(&run("router")).unwrap();
        assert!(line.contains("(no-route)") && line.contains("routes:"), "{line}");
    }

    #[test]
    fn a_chain_that_forwards_says_nothing() {
        assert_eq!(nearly_all_dropped(&run("forwarder -> nat44")), None);
        // Dropping a share is not dropping nearly everything.
        assert_eq!(nearly_all_dropped(&run("synthetic(drop_one_in=2)")), None);
    }
}
