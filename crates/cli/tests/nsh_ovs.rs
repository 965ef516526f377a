//! NSH interop with Open vSwitch's userspace datapath, end to end over veths (needs
//! root for namespaces; CI is root and has Open vSwitch):
//!
//! ```text
//! tester --> hop 1: sfclab nsh-classifier (SPI 0x2a, MD type 1, C1 0x01020304)
//!                   -> nsh-sff (TTL 63 -> 62) -> nsh-proxy (SI 255 -> 254)
//!        --> hop 2: Open vSwitch, one flow that matches all of it exactly
//!                   (nsh_spi, nsh_si, nsh_ttl, nsh_c1, nsh_mdtype, nsh_np), takes
//!                   both headers off (`decap(),decap()`) and puts its own on
//!                   (`encap(nsh(md_type=2, tlv(...)))`, SPI 0x2b, SI 200, `encap(ethernet)`)
//!        --> hop 3: sfclab nsh-sff (SPI 0x2b SI 200) -> nsh-proxy (SI 199)
//!                   -> nsh-sff (SPI 0x2b SI 199: the path's end, decap) --> tester
//! ```
//!
//! OVS reads what sfclab writes (its flow counts every frame; a frame it did not match
//! would hit the drop flow), sfclab reads what OVS writes (its SFFs count every frame,
//! MD type 2 context included), and the tester checks every datagram came back whole.

use serde_json::Value;
use std::time::Duration;

mod common;
use common::{place, run_tester, spawn_dut, stderr, stdout, stop_dut};

/// `n_packets` of the flow in `dump` (ovs-ofctl dump-flows) that contains `needle`.
fn flow_packets(dump: &str, needle: &str) -> u64 {
    let line = dump
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no flow with `{needle}` in:\n{dump}"));
    let at = line.find("n_packets=").expect("n_packets") + "n_packets=".len();
    line[at..].split(',').next().unwrap().parse().unwrap()
}

#[test]
#[ignore = "needs root for namespaces and Open vSwitch (CI runs it)"]
fn open_vswitch_reads_the_nsh_sfclab_writes_and_sfclab_reads_what_it_writes() {
    sfclab_topology::require_root("namespaces and Open vSwitch");
    assert!(
        sfclab_topology::ovs::installed(),
        "needs Open vSwitch (apt-get install openvswitch-switch)"
    );
    let bed = sfclab_topology::Testbed::build_chain(3, 1).unwrap();
    let (first, middle, last) = (&bed.hops[0], &bed.hops[1], &bed.hops[2]);
    let mac = |i: &sfclab_topology::Interface| i.counters().unwrap().address;
    let dir = tempfile::tempdir().unwrap();

    let classify = dir.path().join("classify.yaml");
    std::fs::write(
        &classify,
        "name: classify\nchain:\n  - nsh-classifier:\n      paths:\n        - { spi: 0x2a, context: [0x01020304, 0, 0, 7] }\n  - nsh-sff:\n      forward:\n        - { spi: 0x2a, si: 255 }\n  - nsh-proxy\n",
    )
    .unwrap();
    let end = dir.path().join("end.yaml");
    std::fs::write(
        &end,
        "name: end\nchain:\n  - nsh-sff:\n      name: first\n      forward:\n        - { spi: 0x2b, si: 200 }\n  - nsh-proxy\n  - nsh-sff:\n      name: last\n      forward:\n        - { spi: 0x2b, si: 199, decap: true }\n",
    )
    .unwrap();

    let switch = sfclab_topology::ovs::OvsSwitch::start(&middle.namespace, None).unwrap();
    let (o_in, o_out) = (middle.input.name(), middle.output.name());
    switch
        .bridge("nsh0", &[o_in, o_out], sfclab_topology::ovs::OvsPort::System)
        .unwrap();
    let ours = format!(
        "priority=10,in_port={o_in},dl_type=0x894f,nsh_mdtype=1,nsh_np=3,nsh_spi=0x2a,nsh_si=254,nsh_ttl=62,nsh_c1=0x01020304,nsh_c4=7,\
         actions=decap(),decap(),encap(nsh(md_type=2,tlv(0x0101,3,0xaabbccdd))),set_field:0x2b->nsh_spi,set_field:200->nsh_si,\
         encap(ethernet),set_field:{}->eth_dst,output:{o_out}",
        mac(&last.input)
    );
    // encap and decap need OpenFlow 1.3's flow format.
    let of13 = ["-O", "OpenFlow13"];
    switch
        .ofctl("add-flow", "nsh0", &[&of13[..], &[&ours]].concat())
        .unwrap();
    switch
        .ofctl("add-flow", "nsh0", &[&of13[..], &["priority=1,actions=drop"]].concat())
        .unwrap();

    // What the first SFF of hop 3 passes on: Open vSwitch's header, TTL lowered.
    let tap = dir.path().join("after-first.pcap");
    let classifier = spawn_dut(first, &classify, &[]);
    let ending = spawn_dut(last, &end, &["--tap".into(), format!("first={}", tap.display())]);
    std::thread::sleep(Duration::from_secs(1));
    let tester = run_tester(&bed);
    let (c, e) = (stop_dut(classifier), stop_dut(ending));
    let flows = switch.ofctl("dump-flows", "nsh0", &of13).unwrap();
    assert!(tester.status.success(), "{}", stderr(&tester));
    let t: Value = serde_json::from_str(&stdout(&tester)).unwrap();

    let sent = t["conservation"]["generated"].as_u64().unwrap();
    assert!(sent >= 3000, "{}", t["conservation"]);
    assert_eq!(
        place(&c, "nsh-proxy")["packets_out"],
        sent,
        "sfclab classified every frame"
    );
    assert_eq!(
        flow_packets(&flows, "nsh_spi=0x2a"),
        sent,
        "Open vSwitch matched every frame's NSH exactly:\n{flows}"
    );
    assert_eq!(
        flow_packets(&flows, "priority=1 actions=drop"),
        0,
        "and dropped none:\n{flows}"
    );
    assert_eq!(
        place(&e, "first")["counters"]["forwarded"],
        sent,
        "sfclab forwarded every frame by the SPI and SI Open vSwitch wrote: {}",
        e["places"]
    );
    assert_eq!(place(&e, "nsh-proxy")["counters"]["proxied"], sent, "{}", e["places"]);
    assert_eq!(
        place(&e, "last")["counters"]["decapsulated"],
        sent,
        "and took the header off at the path's end"
    );
    let mut frames = pcap_file::pcap::PcapReader::new(std::fs::File::open(&tap).unwrap()).unwrap();
    let frame = frames.next_packet().unwrap().unwrap().data.into_owned();
    assert_eq!(&frame[12..14], &[0x89, 0x4f], "NSH over Ethernet");
    let (h, len) = sfclab_wire::nsh::check(&frame[14..]).unwrap();
    assert_eq!(
        (h.md(), h.next(), h.spi(), h.si(), h.ttl()),
        (2, sfclab_wire::nsh::NextProtocol::Ethernet, 0x2b, 200, 62),
        "the header Open vSwitch wrote, TTL 63 lowered by the SFF"
    );
    let tlvs: Vec<_> = sfclab_wire::nsh::tlvs(&frame[22..14 + len])
        .map(Result::unwrap)
        .collect();
    assert_eq!(tlvs.len(), 1);
    assert_eq!(
        (tlvs[0].class, tlvs[0].kind, tlvs[0].value),
        (0x0101, 3, &[0xaa, 0xbb, 0xcc, 0xdd][..])
    );
    assert_eq!(t["window_loss"]["lost"], 0, "{}", t["places"]);
    assert_eq!(t["verify_failed"], 0, "every datagram came back whole");
    drop(switch);
    drop(bed);
}
