//! A flood of 10 million new flows through nat44 and the stateful firewall: each packet
//! opens a flow no packet opened before, and none is ever answered. The tables fill to
//! their configured bound and stay there, their memory does not grow by a byte, and past
//! the bound each new flow takes the place of the oldest unassured one (netfilter's early
//! drop), counted exactly; none is dropped.

use sfclab_core::nf::Verdict;
use sfclab_core::{Batch, BatchView, ChainContext, Emitted, NetworkFunction, PacketPool, Verdicts};
use sfclab_nf::NfSpec;
use sfclab_wire::checksum;

const FLOWS: u64 = 10_000_000;
const BATCH: usize = 32;

/// An Ethernet/IPv4/UDP frame from 198.18.0.0 port 1024 to 203.0.113.200:53 (UDP
/// checksum 0: none, as IPv4 allows).
fn template() -> [u8; 60] {
    let mut f = [0u8; 60];
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14..34].copy_from_slice(&[
        0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 198, 18, 0, 0, 203, 0, 113, 200,
    ]);
    f[34..42].copy_from_slice(&[4, 0, 0, 53, 0, 26, 0, 0]);
    f
}

/// Flow `i`'s frame: its own inside address (198.18.0.0/16) and source port.
fn write_flow(frame: &mut [u8], i: u64) {
    let addr = 0xc612_0000u32 | (i % (1 << 16)) as u32;
    let port = 1024 + (i >> 16) as u16;
    frame[26..30].copy_from_slice(&addr.to_be_bytes());
    frame[34..36].copy_from_slice(&port.to_be_bytes());
    frame[24..26].copy_from_slice(&[0, 0]);
    let sum = checksum::checksum(&frame[14..34]);
    frame[24..26].copy_from_slice(&sum.to_be_bytes());
}

fn gauge(nf: &dyn NetworkFunction, name: &str) -> u64 {
    nf.counters()
        .iter()
        .find(|c| c.name == name)
        .map(|c| c.value)
        .unwrap_or_else(|| panic!("no counter {name}"))
}

/// Floods `nf` with FLOWS new flows; returns (passed, dropped by reason name).
fn flood(nf: &mut dyn NetworkFunction) -> (u64, Vec<(&'static str, u64)>) {
    let mut pool = PacketPool::new(BATCH);
    let mut batch = Batch::new(BATCH);
    let mut verdicts = Verdicts::for_batch(BATCH);
    let mut emitted = Emitted::default();
    let template = template();
    let (mut passed, mut drops) = (0u64, Vec::<(&'static str, u64)>::new());
    let mut i = 0;
    while i < FLOWS {
        let n = BATCH.min((FLOWS - i) as usize);
        pool.alloc_into(&mut batch, n);
        for (k, p) in batch.iter_mut().enumerate() {
            let f = p.reset(template.len());
            f.copy_from_slice(&template);
            write_flow(f, i + k as u64);
        }
        verdicts.begin(n);
        // The clock stands still: nothing may expire and make room.
        let mut ctx = ChainContext::new(1, 0, 1.0, &mut pool, &mut emitted);
        nf.process(ctx.nf(), BatchView::new(&mut batch), &mut verdicts);
        for k in 0..n {
            match verdicts.get(k) {
                Verdict::Drop(r) => {
                    let name = r.name(nf.drop_reasons());
                    match drops.iter_mut().find(|(d, _)| *d == name) {
                        Some((_, c)) => *c += 1,
                        None => drops.push((name, 1)),
                    }
                }
                _ => passed += 1,
            }
        }
        verdicts.clear();
        pool.free_batch(&mut batch);
        i += n as u64;
    }
    assert_eq!(pool.in_use(), 0);
    (passed, drops)
}

#[test]
fn nat44_under_a_flood_of_new_flows_stays_within_its_bound() {
    let bound = 100_000;
    let spec = NfSpec::new("nat44", serde_json::json!({ "max_sessions": bound })).unwrap();
    let mut nat = spec.build();
    let bytes = gauge(nat.as_ref(), "table_bytes");
    let (passed, drops) = flood(nat.as_mut());
    assert_eq!((passed, drops), (FLOWS, vec![]));
    assert_eq!(gauge(nat.as_ref(), "evicted"), FLOWS - bound);
    assert_eq!(gauge(nat.as_ref(), "sessions"), bound);
    assert_eq!(gauge(nat.as_ref(), "table_bytes"), bytes, "the table's memory grew");
}

#[test]
fn firewall_under_a_flood_of_new_flows_stays_within_its_bound() {
    let bound = 100_000;
    let spec = NfSpec::new(
        "firewall",
        serde_json::json!({ "rules": [{ "action": "allow", "proto": "udp" }], "max_connections": bound }),
    )
    .unwrap();
    let mut fw = spec.build();
    let bytes = gauge(fw.as_ref(), "table_bytes");
    let (passed, drops) = flood(fw.as_mut());
    assert_eq!((passed, drops), (FLOWS, vec![]));
    assert_eq!(gauge(fw.as_ref(), "early_drops"), FLOWS - bound);
    assert_eq!(gauge(fw.as_ref(), "connections"), bound);
    assert_eq!(gauge(fw.as_ref(), "table_bytes"), bytes, "the table's memory grew");
}
