//! ClassBench rule and trace files (Taylor and Turner, INFOCOM 2005), in the form
//! DPDK's `dpdk-test-acl` reads them, and a generator of ClassBench-style sets.
//!
//! Rule: `@src/len <tab> dst/len <tab> sport_lo : sport_hi <tab> dport_lo : dport_hi
//! <tab> proto/mask`, protocol mask `0xff` (exact) or `0x00` (any). Trace: `src dst
//! sport dport proto`, addresses as 32-bit numbers.
//!
//! The generator is not ClassBench's (its seed files are not shipped here): it draws
//! rules with the traits of ClassBench's `acl1` seed that decide a classifier's cost —
//! addresses nested under a limited set of networks, mostly host and /24 destinations,
//! half the sources wildcard or short, destination ports mostly exact well-known ports
//! with some ranges, source ports mostly wildcard, TCP-heavy protocols. A trace picks a
//! rule uniformly and a header inside it, as ClassBench's trace generator does without
//! locality; the first matching rule may be an earlier one.

use std::fmt::Write;
use std::net::Ipv4Addr;

use super::{Key, Match, mask32};
use crate::tables::lpm::SplitMix;

/// Parses a ClassBench rule file; an error names the line.
pub fn parse_rules(text: &str) -> Result<Vec<Match>, String> {
    let mut rules = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        rules.push(parse_rule(line).map_err(|e| format!("line {}: {e}", n + 1))?);
    }
    Ok(rules)
}

fn parse_rule(line: &str) -> Result<Match, String> {
    let body = line.strip_prefix('@').ok_or("a rule starts with `@`")?;
    let f: Vec<&str> = body.split_whitespace().collect();
    // src dst lo : hi lo : hi proto/mask
    if f.len() < 9 || f[3] != ":" || f[6] != ":" {
        return Err("expected `@src/len dst/len lo : hi lo : hi proto/mask`".into());
    }
    let prefix = |s: &str| -> Result<(u32, u8), String> {
        let (a, l) = s.split_once('/').ok_or_else(|| format!("`{s}`: not addr/len"))?;
        let a: Ipv4Addr = a.parse().map_err(|_| format!("`{a}`: not an IPv4 address"))?;
        let l: u8 = l
            .parse()
            .ok()
            .filter(|l| *l <= 32)
            .ok_or_else(|| format!("`{s}`: length not 0..=32"))?;
        Ok((u32::from(a) & mask32(l), l))
    };
    let port = |s: &str| s.parse::<u16>().map_err(|_| format!("`{s}`: not a port"));
    let range = |lo: &str, hi: &str| -> Result<(u16, u16), String> {
        let (lo, hi) = (port(lo)?, port(hi)?);
        if lo > hi {
            return Err(format!("port range {lo} : {hi} is empty"));
        }
        Ok((lo, hi))
    };
    let number = |s: &str| {
        let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            Some(h) => u8::from_str_radix(h, 16),
            None => s.parse(),
        };
        v.map_err(|_| format!("`{s}`: not a byte"))
    };
    let (p, m) = f[8].split_once('/').ok_or("protocol is value/mask")?;
    let proto = match (number(p)?, number(m)?) {
        (_, 0) => None,
        (p, 0xff) => Some(p),
        (_, m) => return Err(format!("protocol mask {m:#04x}: only 0xff and 0x00 are supported")),
    };
    Ok(Match {
        src: prefix(f[0])?,
        dst: prefix(f[1])?,
        sport: range(f[2], f[4])?,
        dport: range(f[5], f[7])?,
        proto,
    })
}

pub fn format_rules(rules: &[Match]) -> String {
    let mut out = String::new();
    for r in rules {
        let (p, m) = r.proto.map_or((0, 0), |p| (p, 0xff));
        let _ = writeln!(
            out,
            "@{}/{}\t{}/{}\t{} : {}\t{} : {}\t{p:#04x}/{m:#04x}",
            Ipv4Addr::from(r.src.0),
            r.src.1,
            Ipv4Addr::from(r.dst.0),
            r.dst.1,
            r.sport.0,
            r.sport.1,
            r.dport.0,
            r.dport.1,
        );
    }
    out
}

pub fn format_trace(keys: &[Key]) -> String {
    let mut out = String::new();
    for k in keys {
        let _ = writeln!(out, "{:#x} {:#x} {} {} {}", k.src, k.dst, k.sport, k.dport, k.proto);
    }
    out
}

/// Picks from `(value, weight)` pairs.
fn weighted<T: Copy>(rng: &mut SplitMix, table: &[(T, u32)]) -> T {
    let total: u32 = table.iter().map(|(_, w)| w).sum();
    let mut x = (rng.next() % u64::from(total)) as u32;
    for &(v, w) in table {
        if x < w {
            return v;
        }
        x -= w;
    }
    table[table.len() - 1].0
}

const SRC_LENGTHS: [(u8, u32); 7] = [(0, 22), (8, 3), (16, 12), (20, 5), (24, 18), (28, 5), (32, 35)];
const DST_LENGTHS: [(u8, u32); 7] = [(0, 6), (8, 2), (16, 10), (20, 4), (24, 25), (28, 5), (32, 48)];
const PROTOCOLS: [(Option<u8>, u32); 4] = [(Some(6), 62), (Some(17), 24), (None, 9), (Some(1), 5)];
const WELL_KNOWN: [u16; 16] = [
    80, 443, 53, 22, 25, 110, 143, 3306, 8080, 123, 161, 389, 445, 1433, 3389, 5060,
];

#[derive(Clone, Copy)]
enum PortClass {
    Any,
    High,
    Low,
    Exact,
    Range,
}

const SPORT_CLASSES: [(PortClass, u32); 4] = [
    (PortClass::Any, 86),
    (PortClass::High, 6),
    (PortClass::Exact, 4),
    (PortClass::Range, 4),
];
const DPORT_CLASSES: [(PortClass, u32); 5] = [
    (PortClass::Exact, 46),
    (PortClass::Any, 24),
    (PortClass::Range, 14),
    (PortClass::High, 10),
    (PortClass::Low, 6),
];

fn port_range(rng: &mut SplitMix, class: PortClass) -> (u16, u16) {
    match class {
        PortClass::Any => (0, 65535),
        PortClass::High => (1024, 65535),
        PortClass::Low => (0, 1023),
        PortClass::Exact => {
            let p = if rng.next().is_multiple_of(4) {
                rng.next() as u16
            } else {
                WELL_KNOWN[(rng.next() % WELL_KNOWN.len() as u64) as usize]
            };
            (p, p)
        }
        PortClass::Range => {
            let lo = (rng.next() % 60_000) as u16;
            (lo, lo + (rng.next() % 2_000) as u16)
        }
    }
}

/// `n` ClassBench-style rules; see the module docs.
pub fn generate_rules(n: usize, seed: u64) -> Vec<Match> {
    let mut rng = SplitMix(seed);
    // Networks the rules nest under: as many /16s as a site's ACL would name.
    let nets = (n / 24).clamp(4, 2048);
    let src_nets: Vec<u32> = (0..nets).map(|_| (rng.next() as u32) & 0xffff_0000).collect();
    let dst_nets: Vec<u32> = (0..nets).map(|_| (rng.next() as u32) & 0xffff_0000).collect();
    let address = |rng: &mut SplitMix, nets: &[u32], len: u8| {
        let net = nets[(rng.next() % nets.len() as u64) as usize];
        // Hosts and subnets cluster in a few /24s of each network.
        let subnet = ((rng.next() % 16) as u32) << 8;
        let host = (rng.next() as u32) & 0xff;
        (net | subnet | host) & mask32(len)
    };
    (0..n)
        .map(|_| {
            let proto = weighted(&mut rng, &PROTOCOLS);
            let ported = matches!(proto, Some(6) | Some(17));
            let (sl, dl) = (weighted(&mut rng, &SRC_LENGTHS), weighted(&mut rng, &DST_LENGTHS));
            let sport_class = if ported {
                weighted(&mut rng, &SPORT_CLASSES)
            } else {
                PortClass::Any
            };
            let dport_class = if ported {
                weighted(&mut rng, &DPORT_CLASSES)
            } else {
                PortClass::Any
            };
            Match {
                src: (address(&mut rng, &src_nets, sl), sl),
                dst: (address(&mut rng, &dst_nets, dl), dl),
                proto,
                sport: port_range(&mut rng, sport_class),
                dport: port_range(&mut rng, dport_class),
            }
        })
        .collect()
}

/// `n` headers, each inside a rule picked uniformly.
pub fn generate_trace(rules: &[Match], n: usize, seed: u64) -> Vec<Key> {
    let mut rng = SplitMix(seed);
    if rules.is_empty() {
        return Vec::new();
    }
    let inside = |rng: &mut SplitMix, (a, l): (u32, u8)| a | (rng.next() as u32 & !mask32(l));
    let port = |rng: &mut SplitMix, (lo, hi): (u16, u16)| lo + (rng.next() % (u64::from(hi - lo) + 1)) as u16;
    (0..n)
        .map(|_| {
            let r = &rules[(rng.next() % rules.len() as u64) as usize];
            Key {
                src: inside(&mut rng, r.src),
                dst: inside(&mut rng, r.dst),
                proto: r.proto.unwrap_or([6, 17, 1][(rng.next() % 3) as usize]),
                sport: port(&mut rng, r.sport),
                dport: port(&mut rng, r.dport),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_round_trip_through_the_file_format() {
        let rules = generate_rules(500, 3);
        let text = format_rules(&rules);
        assert!(text.starts_with('@'));
        assert_eq!(parse_rules(&text).unwrap(), rules);
        let first = text.lines().next().unwrap();
        assert_eq!(first.split('\t').count(), 5, "{first}");
    }

    #[test]
    fn parses_dpdk_style_lines_and_names_bad_ones() {
        let text = "# comment\n@192.168.0.0/16\t10.0.0.0/8\t0 : 65535\t80 : 80\t0x06/0xff\n\
                    @0.0.0.0/0 0.0.0.0/0 0 : 65535 0 : 65535 0x00/0x00\n";
        let rules = parse_rules(text).unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].src, (0xc0a8_0000, 16));
        assert_eq!(rules[0].proto, Some(6));
        assert_eq!(rules[0].dport, (80, 80));
        assert_eq!(rules[1].proto, None);
        for (bad, why) in [
            ("192.168.0.0/16 10.0.0.0/8 0 : 1 0 : 1 0x06/0xff", "starts with `@`"),
            ("@192.168.0.0/33 10.0.0.0/8 0 : 1 0 : 1 0x06/0xff", "length"),
            ("@1.2.3.4/8 10.0.0.0/8 5 : 1 0 : 1 0x06/0xff", "empty"),
            ("@1.2.3.4/8 10.0.0.0/8 0 : 1 0 : 1 0x06/0xf0", "mask"),
        ] {
            let err = parse_rules(&format!("\n{bad}")).unwrap_err();
            assert!(err.starts_with("line 2:") && err.contains(why), "{err}");
        }
    }

    #[test]
    fn trace_headers_lie_inside_their_rules_and_generation_is_deterministic() {
        let rules = generate_rules(200, 11);
        assert_eq!(rules, generate_rules(200, 11));
        let lin = crate::tables::acl::Linear::new(&rules);
        let trace = generate_trace(&rules, 2000, 12);
        // Every header matches some rule (the one it was drawn from, or an earlier one).
        assert!(trace.iter().all(|k| lin.classify(k).is_some()));
        assert!(format_trace(&trace[..1]).split_whitespace().count() == 5);
    }
}
