//! Each NF's output for a fixed input, written as pcap (nanosecond timestamps) and read
//! back by `tshark` with every checksum check on: no malformed packet, no bad checksum,
//! no expert error, and as many frames as were written. Wireshark is an independent
//! implementation of every protocol these NFs rewrite or create.

use sfclab_core::NetworkFunction;
use std::path::Path;
use std::process::Command;

mod common;
use common::{frames, output, write_pcap};

use sfclab_nf::firewall::{Firewall, FirewallConfig};
use sfclab_nf::nat44::{Nat44, Nat44Config};
use sfclab_nf::router::{Router, RouterConfig};

/// tshark's preferences that check every IPv4, UDP and TCP checksum.
const CHECK_CHECKSUMS: [&str; 6] = [
    "-o",
    "ip.check_checksum:TRUE",
    "-o",
    "udp.check_checksum:TRUE",
    "-o",
    "tcp.check_checksum:TRUE",
];

/// tshark's verdict on a capture: frames read, and every expert error or warning.
fn tshark(path: &Path) -> Option<(usize, Vec<String>)> {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(path)
        .args(CHECK_CHECKSUMS)
        .args([
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "_ws.expert.severity",
            "-e",
            "_ws.expert.message",
            "-e",
            "_ws.malformed",
        ])
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    let problems = lines
        .iter()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("malformed") || l.contains("bad checksum") || l.contains("incorrect") || l.contains("error")
        })
        .map(|l| l.to_string())
        .collect();
    Some((lines.len(), problems))
}

fn check(name: &str, mut nf: Box<dyn NetworkFunction>, expect_frames: usize) {
    let out = output(nf.as_mut(), &frames());
    assert_eq!(out.len(), expect_frames, "{name}: frames out");
    let path = std::env::temp_dir().join(format!("sfclab-{name}-{}.pcap", std::process::id()));
    write_pcap(&path, &out);
    let verdict = tshark(&path);
    let _ = std::fs::remove_file(&path);
    let (read, problems) = verdict.expect("tshark is not installed (Debian package `tshark`)");
    assert_eq!(read, out.len(), "{name}: tshark read every frame");
    assert!(problems.is_empty(), "{name}: tshark says {problems:#?}");
}

#[test]
#[ignore = "needs tshark (Debian package tshark; CI installs it and runs it)"]
fn router_output_reads_clean_in_tshark() {
    let r = Router::new(&RouterConfig {
        routes: vec![
            "10.0.0.0/8 192.0.2.1 0".into(),
            "198.18.0.0/15 - 1".into(),
            "2001:db8::/32 fe80::1 0".into(),
            "2001:2::/32 fe80::2 1".into(),
        ],
        ..Default::default()
    })
    .unwrap();
    // 3 forwarded, 2 expired (TTL/hop limit 1) answered with ICMP errors.
    check("router", Box::new(r), 5);
}

#[test]
#[ignore = "needs tshark (Debian package tshark; CI installs it and runs it)"]
fn nat44_output_reads_clean_in_tshark() {
    let nat = Nat44::new(&Nat44Config::default()).unwrap();
    // IPv6 is not NAT44's: dropped as unsupported.
    check("nat44", Box::new(nat), 4);
}

#[test]
#[ignore = "needs tshark (Debian package tshark; CI installs it and runs it)"]
fn firewall_output_reads_clean_in_tshark() {
    let fw = Firewall::new(&FirewallConfig {
        default: Some("allow".into()),
        ..Default::default()
    })
    .unwrap();
    check("firewall", Box::new(fw), 4);
}

#[test]
#[ignore = "needs tshark (Debian package tshark; CI installs it and runs it)"]
fn the_check_catches_a_bad_checksum() {
    let mut frames = frames();
    frames.truncate(1);
    frames[0][24] ^= 0x55; // the IPv4 header checksum
    let path = std::env::temp_dir().join(format!("sfclab-bad-{}.pcap", std::process::id()));
    write_pcap(&path, &frames);
    let verdict = tshark(&path);
    let _ = std::fs::remove_file(&path);
    let (_, problems) = verdict.expect("tshark is not installed (Debian package `tshark`)");
    assert!(!problems.is_empty(), "a broken checksum must be reported");
}

/// ESP as Wireshark reads it: what esp-encrypt writes (AES-128-GCM and AES-256-GCM)
/// decrypts in tshark, given the same key and salt, to the frames that went in: inner
/// IPv4 and IPv6 headers, ports and checksums as before, nothing malformed. (tshark 4.0
/// does not check GCM's ICV; the Linux interop test does.)
#[test]
#[ignore = "needs tshark (Debian package tshark; CI installs it and runs it)"]
fn esp_encrypt_output_decrypts_in_tshark() {
    let frames = frames();
    let algorithm = "AES-GCM with 16 octet ICV [RFC4106]";
    for key in [
        "0x0102030405060708090a0b0c0d0e0f10a0a1a2a3",
        "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20a0a1a2a3",
    ] {
        let settings = serde_json::json!({"sas": [{"spi": "0x1000", "key": key,
            "tunnel": {"src": "192.0.2.1", "dst": "192.0.2.2"}}]});
        let mut nf = sfclab_nf::NfSpec::new("esp-encrypt", settings).unwrap().build();
        let out = output(nf.as_mut(), &frames);
        assert_eq!(out.len(), frames.len());
        let path = std::env::temp_dir().join(format!("sfclab-esp-{}-{}.pcap", key.len(), std::process::id()));
        write_pcap(&path, &out);
        // The key field is the AES key and salt, as ip xfrm takes it (RFC 4106 keying).
        let sa = format!("\"IPv4\",\"192.0.2.1\",\"192.0.2.2\",\"0x00001000\",\"{algorithm}\",\"{key}\",\"NULL\",\"\"");
        let run = Command::new("tshark")
            .args(["-n", "-r"])
            .arg(&path)
            .args([
                "-o",
                "esp.enable_encryption_decode:TRUE",
                "-o",
                &format!("uat:esp_sa:{sa}"),
            ])
            .args(CHECK_CHECKSUMS)
            .args([
                "-T",
                "fields",
                "-E",
                "separator=|",
                "-e",
                "ip.src",
                "-e",
                "ipv6.src",
                "-e",
                "udp.dstport",
                "-e",
                "tcp.dstport",
            ])
            .args(["-e", "_ws.malformed", "-e", "_ws.expert.message"])
            .output()
            .expect("tshark is not installed (Debian package `tshark`)");
        let _ = std::fs::remove_file(&path);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let text = String::from_utf8_lossy(&run.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), frames.len(), "{text}");
        // Outer then inner source; the inner ports show only once decrypted.
        let fields: Vec<&str> = lines.iter().map(|l| l.rsplit_once('|').unwrap().0).collect();
        assert_eq!(
            fields,
            [
                "192.0.2.1,198.18.0.1||5001||",
                "192.0.2.1,198.18.0.2|||80|",
                "192.0.2.1,198.18.0.3||||",
                "192.0.2.1,198.18.0.4||5001||",
                "192.0.2.1|2001:2::1|5001||"
            ],
            "{text}"
        );
        let lower = text.to_ascii_lowercase();
        assert!(!lower.contains("checksum") && !lower.contains("malformed"), "{text}");
    }
}

/// What `nsh-classifier` writes, and what `nsh-sff` and `nsh-proxy` leave of it, as
/// tshark's NSH dissector reads it: base header, path, MD type 1 context and MD type 2
/// context headers, and the packet inside (its checksums checked).
#[test]
#[ignore = "needs tshark (Debian package tshark; CI installs it and runs it)"]
fn nsh_headers_read_as_written_in_tshark() {
    let frames = frames();
    let nf = |kind: &str, settings: serde_json::Value| sfclab_nf::NfSpec::new(kind, settings).unwrap().build();
    let md1 = output(
        nf(
            "nsh-classifier",
            serde_json::json!({"paths": [{"spi": 4242, "ttl": 9, "context": [1, 2, 3, 0xfeedface_u32]}]}),
        )
        .as_mut(),
        &frames,
    );
    let md2 = output(
        nf(
            "nsh-classifier",
            serde_json::json!({"inner": "ip", "paths": [{"spi": 7, "si": 20,
            "metadata": [{"class": 0x0101, "type": 3, "value": "0xaabbccdd01"}]}]}),
        )
        .as_mut(),
        &frames,
    );
    // An SFF (TTL 9 -> 8), then a proxy around a forwarder (SI 255 -> 254).
    let forwarded = output(
        nf("nsh-sff", serde_json::json!({"forward": [{"spi": 4242, "si": 255}]})).as_mut(),
        &md1,
    );
    let proxied = output(
        nf("nsh-proxy", serde_json::json!({"nf": "forwarder"})).as_mut(),
        &forwarded,
    );
    let fields = |frames: &[Vec<u8>], name: &str| -> Vec<String> {
        let path = std::env::temp_dir().join(format!("sfclab-nsh-{name}-{}.pcap", std::process::id()));
        write_pcap(&path, frames);
        let run = Command::new("tshark")
            .args(["-n", "-r"])
            .arg(&path)
            .args(CHECK_CHECKSUMS)
            .args(["-T", "fields", "-E", "separator=|"])
            .args(
                [
                    "nsh.spi",
                    "nsh.si",
                    "nsh.ttl",
                    "nsh.mdtype",
                    "nsh.nextproto",
                    "nsh.contextheader",
                    "nsh.metadataclass",
                    "nsh.metadatatype",
                    "nsh.metadatalen",
                    "nsh.metadata",
                    "ip.src",
                    "ipv6.src",
                    "udp.dstport",
                    "tcp.dstport",
                    "_ws.malformed",
                    "_ws.expert.message",
                ]
                .iter()
                .flat_map(|f| ["-e", f]),
            )
            .output()
            .expect("tshark is not installed (Debian package `tshark`)");
        let _ = std::fs::remove_file(&path);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        String::from_utf8_lossy(&run.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    };
    // The last field, tshark's expert notes, is left out: the fixture's own (a SYN, a
    // TTL of 1) are not about NSH; malformed packets show in `_ws.malformed`.
    let without_notes = |lines: Vec<String>| -> Vec<String> {
        lines
            .iter()
            .map(|l| l.rsplit_once('|').unwrap().0.to_string())
            .collect()
    };
    let inner = [
        "198.18.0.1||5001||",
        "198.18.0.2|||80|",
        "198.18.0.3||||",
        "198.18.0.4||5001||",
        "|2001:2::1|5001||",
    ];
    let expect = |nsh: &dyn Fn(usize) -> String| -> Vec<String> {
        inner
            .iter()
            .enumerate()
            .map(|(k, rest)| format!("{}|{rest}", nsh(k)))
            .collect()
    };
    let context = "00000001,00000002,00000003,feedface";
    assert_eq!(
        without_notes(fields(&md1, "md1")),
        expect(&|_| format!("4242|255|0x0009|1|3|{context}||||")),
        "MD type 1 around the frame: SPI, SI 255, TTL 9, next protocol Ethernet"
    );
    assert_eq!(
        without_notes(fields(&md2, "md2")),
        expect(&|k| format!("7|20|0x003f|2|{}||257|3|0x05|aabbccdd01", if k == 4 { 2 } else { 1 })),
        "MD type 2 around the datagram: next protocol IPv4 or IPv6, one context header"
    );
    assert_eq!(
        without_notes(fields(&proxied, "proxied")),
        expect(&|_| format!("4242|254|0x0008|1|3|{context}||||")),
        "after an SFF (TTL 9 -> 8) and a proxy (SI 255 -> 254), the context as it was"
    );
}
