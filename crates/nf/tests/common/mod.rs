//! What the NF-level peer tests share: a fixed set of frames, one NF's output for them,
//! and pcap files both ways.

// Each test binary uses part of this.
#![allow(dead_code)]

use sfclab_core::{Batch, BatchView, ChainContext, Emitted, NetworkFunction, PacketPool, Verdict, Verdicts};
use std::path::Path;
use std::time::Duration;

fn eth() -> etherparse::PacketBuilderStep<etherparse::Ethernet2Header> {
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xaa], [2, 0, 0, 0, 0, 0xbb])
}

pub fn frames() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut push = |write: &dyn Fn(&mut Vec<u8>)| {
        let mut f = Vec::new();
        write(&mut f);
        out.push(f);
    };
    push(&|f| {
        eth()
            .ipv4([198, 18, 0, 1], [10, 1, 2, 3], 64)
            .udp(1024, 5001)
            .write(f, &[7; 22])
            .unwrap()
    });
    push(&|f| {
        eth()
            .ipv4([198, 18, 0, 2], [10, 1, 2, 3], 64)
            .tcp(40000, 80, 7, 65535)
            .syn()
            .write(f, &[])
            .unwrap()
    });
    push(&|f| {
        eth()
            .ipv4([198, 18, 0, 3], [10, 9, 9, 9], 64)
            .icmpv4_echo_request(9, 1)
            .write(f, &[1; 24])
            .unwrap()
    });
    // TTL 1: the router answers with ICMP time exceeded.
    push(&|f| {
        eth()
            .ipv4([198, 18, 0, 4], [10, 1, 2, 3], 1)
            .udp(1024, 5001)
            .write(f, &[7; 22])
            .unwrap()
    });
    push(&|f| {
        let src = "2001:2::1".parse::<std::net::Ipv6Addr>().unwrap().octets();
        let dst = "2001:db8::9".parse::<std::net::Ipv6Addr>().unwrap().octets();
        eth().ipv6(src, dst, 1).udp(1024, 5001).write(f, &[3; 30]).unwrap()
    });
    out
}

/// Runs `nf` over `frames` at time zero: every frame as it left the NF (dropped ones
/// too), its verdict, and the packets the NF created.
pub fn run(nf: &mut dyn NetworkFunction, frames: &[Vec<u8>]) -> (Vec<Vec<u8>>, Vec<Verdict>, Vec<Vec<u8>>) {
    let mut pool = PacketPool::new(frames.len().max(64));
    let mut batch = Batch::new(frames.len());
    pool.alloc_into(&mut batch, frames.len());
    for (p, f) in batch.iter_mut().zip(frames) {
        p.reset(f.len()).copy_from_slice(f);
    }
    let mut verdicts = Verdicts::for_batch(frames.len());
    let mut emitted = Emitted::default();
    let mut ctx = ChainContext::new(0, 0, 1.0, &mut pool, &mut emitted);
    nf.process(ctx.nf(), BatchView::new(&mut batch), &mut verdicts);
    let out = batch.iter().map(|p| p.data().to_vec()).collect();
    let v = (0..frames.len()).map(|i| verdicts.get(i)).collect();
    let created = emitted
        .drain()
        .map(|(p, _)| {
            let f = p.data().to_vec();
            pool.free(p);
            f
        })
        .collect();
    pool.free_batch(&mut batch);
    (out, v, created)
}

/// What left `nf` for `frames`: the frames it did not drop, then those it created.
pub fn output(nf: &mut dyn NetworkFunction, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let (out, verdicts, created) = run(nf, frames);
    out.into_iter()
        .zip(verdicts)
        .filter(|(_, v)| !matches!(v, Verdict::Drop(_)))
        .map(|(f, _)| f)
        .chain(created)
        .collect()
}

pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let header = pcap_file::pcap::PcapHeader {
        ts_resolution: pcap_file::TsResolution::NanoSecond,
        ..Default::default()
    };
    let file = std::fs::File::create(path).unwrap();
    let mut w = pcap_file::pcap::PcapWriter::with_header(file, header).unwrap();
    for (k, f) in frames.iter().enumerate() {
        let p = pcap_file::pcap::PcapPacket::new(
            Duration::from_nanos(1_700_000_000_000_000_000 + k as u64),
            f.len() as u32,
            f,
        );
        w.write_packet(&p).unwrap();
    }
}

/// Every frame of the pcap at `path`.
pub fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let file = std::fs::File::open(path).unwrap();
    let mut r = pcap_file::pcap::PcapReader::new(file).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        out.push(p.unwrap().data.into_owned());
    }
    out
}
