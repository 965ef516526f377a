//! Frame sizes. A size is the Ethernet frame on the wire including the 4-byte FCS, as in
//! RFC 2544 (a "64-byte frame" is 60 bytes in the buffer).

use serde::Serialize;

/// The frame sizes of RFC 2544 section 9.1 for Ethernet.
pub const RFC2544_SIZES: [u16; 7] = [64, 128, 256, 512, 1024, 1280, 1518];
/// "Simple IMIX": 64, 594 and 1518 bytes at 7:4:1 by count.
pub const SIMPLE_IMIX: [(u16, u32); 3] = [(64, 7), (594, 4), (1518, 1)];
pub const MIN_FRAME: u16 = 64;
pub const MAX_FRAME: u16 = 1518;

/// Which frame sizes the generator emits, and how often each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FrameSizes {
    Fixed {
        size: u16,
    },
    /// Sizes with integer weights by packet count.
    Mix {
        name: String,
        sizes: Vec<(u16, u32)>,
    },
}

impl FrameSizes {
    pub fn imix() -> FrameSizes {
        FrameSizes::Mix {
            name: "imix".into(),
            sizes: SIMPLE_IMIX.to_vec(),
        }
    }

    /// The RFC 2544 list, each size equally often.
    /// All seven RFC 2544 frame sizes in one stream, one of each in turn: a mix, not
    /// RFC 2544's procedure, which measures each size on its own (`sweep --param size
    /// --values rfc2544` does that).
    pub fn rfc2544_mix() -> FrameSizes {
        FrameSizes::Mix {
            name: "rfc2544-mix".into(),
            sizes: RFC2544_SIZES.iter().map(|&s| (s, 1)).collect(),
        }
    }

    /// The distinct sizes, in the order given.
    pub fn sizes(&self) -> Vec<u16> {
        match self {
            FrameSizes::Fixed { size } => vec![*size],
            FrameSizes::Mix { sizes, .. } => sizes.iter().map(|&(s, _)| s).collect(),
        }
    }

    /// Mean frame size (FCS included), weighted by count.
    pub fn mean(&self) -> f64 {
        match self {
            FrameSizes::Fixed { size } => f64::from(*size),
            FrameSizes::Mix { sizes, .. } => {
                let total: u64 = sizes.iter().map(|&(_, w)| u64::from(w)).sum();
                sizes.iter().map(|&(s, w)| f64::from(s) * f64::from(w)).sum::<f64>() / total as f64
            }
        }
    }

    /// One period of the emission order, as indices into `sizes()`: about
    /// [`SCHEDULE_SLOTS`] frames in which every size appears in proportion to its weight
    /// exactly, shuffled (from a fixed seed: every run sends the same sequence), so the
    /// size of a frame says nearly nothing about the sizes just before it. A line that
    /// takes frames while it has credit (a NIC's transmit queue) refuses the frames
    /// after the ones it owes for: in one fixed order of 12 those were always the same
    /// sizes, and in blocks of 12 each shuffled, more often small ones after small
    /// ones (the block's large ones still to come); either way it passed frames 8–9 %
    /// larger than the mix offered.
    pub fn schedule(&self) -> Vec<u8> {
        let FrameSizes::Mix { sizes, .. } = self else {
            return vec![0];
        };
        let weights: usize = sizes.iter().map(|&(_, w)| w as usize).sum();
        let copies = (SCHEDULE_SLOTS / weights.max(1)).max(1);
        let mut order: Vec<u8> = sizes
            .iter()
            .enumerate()
            .flat_map(|(i, &(_, w))| std::iter::repeat_n(i as u8, w as usize * copies))
            .collect();
        fastrand::Rng::with_seed(SCHEDULE_SEED).shuffle(&mut order);
        order
    }
}

/// About how many frames one period of a mix's schedule holds.
const SCHEDULE_SLOTS: usize = 4096;
/// The schedule's shuffle seed.
const SCHEDULE_SEED: u64 = 0x5fc1_ab00_1a1e_0001;

impl std::fmt::Display for FrameSizes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameSizes::Fixed { size } => write!(f, "{size}"),
            FrameSizes::Mix { name, .. } if !name.is_empty() => f.write_str(name),
            FrameSizes::Mix { sizes, .. } => {
                let parts: Vec<String> = sizes.iter().map(|(s, w)| format!("{s}:{w}")).collect();
                f.write_str(&parts.join(","))
            }
        }
    }
}

/// Most weight units in one mix: bounds the schedule a generator keeps.
const MAX_TOTAL_WEIGHT: u64 = 4096;
/// Most distinct sizes in one mix.
const MAX_SIZES: usize = 32;

impl std::str::FromStr for FrameSizes {
    type Err = String;

    /// `64`, `imix`, `rfc2544-mix`, or `size:weight,size:weight,...` (e.g. `64:7,594:4,1518:1`).
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let check = |size: u16| {
            if (MIN_FRAME..=MAX_FRAME).contains(&size) {
                Ok(size)
            } else {
                Err(format!(
                    "frame size {size} is outside {MIN_FRAME}..={MAX_FRAME} bytes (FCS included)"
                ))
            }
        };
        match s.to_ascii_lowercase().as_str() {
            "imix" => return Ok(FrameSizes::imix()),
            "rfc2544-mix" => return Ok(FrameSizes::rfc2544_mix()),
            "rfc2544" => {
                return Err(format!(
                    "`{s}`: RFC 2544 measures each frame size on its own; write rfc2544-mix for \
                     all seven sizes mixed in one stream, or sweep them: --param size --values rfc2544"
                ));
            }
            _ => {}
        }
        if let Ok(size) = s.parse::<u16>() {
            return Ok(FrameSizes::Fixed { size: check(size)? });
        }
        let mut sizes = Vec::new();
        for part in s.split(',') {
            let (size, weight) = part.split_once(':').ok_or_else(|| {
                format!(
                    "`{s}` is not a frame size: write 64, imix, rfc2544-mix or size:weight,... (e.g. 64:7,594:4,1518:1)"
                )
            })?;
            let size = size
                .trim()
                .parse::<u16>()
                .map_err(|_| format!("`{}` in `{s}` is not a frame size", size.trim()))?;
            let weight = weight
                .trim()
                .parse::<u32>()
                .map_err(|_| format!("`{}` in `{s}` is not a whole-number weight", weight.trim()))?;
            if weight == 0 {
                return Err(format!("weight 0 for size {size} in `{s}`: leave the size out instead"));
            }
            if sizes.iter().any(|&(s2, _)| s2 == size) {
                return Err(format!("size {size} appears twice in `{s}`"));
            }
            sizes.push((check(size)?, weight));
        }
        if sizes.len() > MAX_SIZES {
            return Err(format!("{} sizes in `{s}`: at most {MAX_SIZES}", sizes.len()));
        }
        let total: u64 = sizes.iter().map(|&(_, w)| u64::from(w)).sum();
        if total > MAX_TOTAL_WEIGHT {
            return Err(format!(
                "weights in `{s}` add up to {total}: at most {MAX_TOTAL_WEIGHT}; scale them down"
            ));
        }
        Ok(FrameSizes::Mix {
            name: String::new(),
            sizes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imix_schedule_has_exact_ratios_and_is_the_same_every_time() {
        let imix = FrameSizes::imix();
        let sched = imix.schedule();
        assert_eq!(sched.len(), 4092);
        for (i, &(_, w)) in SIMPLE_IMIX.iter().enumerate() {
            assert_eq!(sched.iter().filter(|&&c| c == i as u8).count(), 341 * w as usize);
        }
        // Any window of a few hundred frames is close to the mix.
        for window in sched.chunks(372) {
            let large = window.iter().filter(|&&c| c == 2).count();
            assert!((15..=47).contains(&large), "{large} of 372 are 1518 B, 31 expected");
        }
        assert_eq!(sched, imix.schedule());
        assert!((imix.mean() - (64.0 * 7.0 + 594.0 * 4.0 + 1518.0) / 12.0).abs() < 1e-9);
        assert_eq!(FrameSizes::Fixed { size: 64 }.schedule(), vec![0]);
    }

    /// A line that sends a frame while its sender has credit, whatever its size (a NIC's
    /// transmit queue; sfclab's emulated line and NIC capacity), offered twice what it
    /// carries: the frames it passes are the mix, not the sizes that happen to follow
    /// the ones it owes for. With one fixed order of 12 they were 8 % larger than IMIX's
    /// mean, and every prediction in frames was that much too high.
    #[test]
    fn a_line_that_takes_frames_while_it_has_credit_passes_the_mix_as_offered() {
        let imix = FrameSizes::imix();
        let sizes = imix.sizes();
        let sched = imix.schedule();
        let mean = imix.mean();
        // Bits accrue at half the offered mean per frame slot.
        let (mut credit, mut passed, mut bytes) = (0.0f64, 0u64, 0u64);
        for slot in 0..200_000usize {
            credit = (credit + mean * 8.0 / 2.0).min(4.0 * 1538.0 * 8.0);
            let size = sizes[usize::from(sched[slot % sched.len()])];
            if credit > 0.0 {
                credit -= f64::from(size) * 8.0;
                passed += 1;
                bytes += u64::from(size);
            }
        }
        let got = bytes as f64 / passed as f64;
        assert!(
            (got - mean).abs() < mean * 0.015,
            "frames passed averaged {got:.1} B, the mix {mean:.1} B"
        );
    }

    #[test]
    fn parses_every_form() {
        assert_eq!("64".parse::<FrameSizes>().unwrap(), FrameSizes::Fixed { size: 64 });
        assert_eq!("IMIX".parse::<FrameSizes>().unwrap(), FrameSizes::imix());
        assert_eq!(
            "rfc2544-mix".parse::<FrameSizes>().unwrap().sizes(),
            RFC2544_SIZES.to_vec()
        );
        let e = "rfc2544".parse::<FrameSizes>().unwrap_err();
        assert!(e.contains("rfc2544-mix") && e.contains("--values rfc2544"), "{e}");
        let custom: FrameSizes = "128:3, 1024:1".parse().unwrap();
        assert_eq!(custom.sizes(), vec![128, 1024]);
        assert_eq!(custom.schedule().len(), 4096);
        assert_eq!(custom.to_string(), "128:3,1024:1");
    }

    #[test]
    fn rejects_bad_sizes_with_reasons() {
        for (bad, why) in [
            ("63", "outside"),
            ("1519", "outside"),
            ("64:0", "weight 0"),
            ("64:1,64:2", "twice"),
            ("big", "not a frame size"),
            ("64:x", "weight"),
            ("64:5000", "at most"),
        ] {
            let err = bad.parse::<FrameSizes>().unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
