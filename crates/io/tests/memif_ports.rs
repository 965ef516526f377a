//! memif ports against each other in one process: an sfclab server and an sfclab
//! client on one socket file, frames both ways, conservation, full rings, a peer that
//! leaves and comes back, interrupt mode, and a peer that writes nonsense.

use sfclab_core::{Batch, PacketPool, RxPort, TxPort};
use sfclab_io::memif::{Config, Interface, MemifPort, MemifSettings, Role, Wait};
use std::path::Path;
use std::time::{Duration, Instant};

mod common;
use common::{counter, frame, send};

fn settings(socket: &Path, role: Role, buffer_size: u32, log2: u8) -> MemifSettings {
    MemifSettings {
        config: Config {
            buffer_size,
            log2_ring_size: log2,
            ..Config::default()
        },
        ..MemifSettings::new(socket, role)
    }
}

/// A server and a client, connected, with one port each doing both directions.
fn pair(dir: &Path, buffer_size: u32, log2: u8) -> (Interface, MemifPort, Interface, MemifPort) {
    let socket = dir.join("memif.sock");
    let mut server = Interface::open(&settings(&socket, Role::Server, buffer_size, log2)).unwrap();
    let mut client = Interface::open(&settings(&socket, Role::Client, buffer_size, log2)).unwrap();
    client.wait_connected(Duration::from_secs(10)).unwrap();
    server.wait_connected(Duration::from_secs(10)).unwrap();
    let s = server.port(0, true, true).unwrap();
    let c = client.port(0, true, true).unwrap();
    (server, s, client, c)
}

/// Receives until `want` frames came or nothing comes for a while.
fn receive(port: &mut MemifPort, pool: &mut PacketPool, want: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut batch = Batch::new(64);
    let mut last = Instant::now();
    while got.len() < want && last.elapsed() < Duration::from_secs(2) {
        if port.rx(0, pool, &mut batch) > 0 {
            last = Instant::now();
        }
        got.extend(batch.iter().map(|p| p.data().to_vec()));
        pool.free_batch(&mut batch);
    }
    got
}

#[test]
fn frames_cross_both_ways_whole_and_in_order_even_across_chained_buffers() {
    let dir = tempfile::tempdir().unwrap();
    // 512-byte buffers: a 1514-byte frame takes three descriptors (the NEXT flag).
    let (_si, mut server, _ci, mut client) = pair(dir.path(), 512, 8);
    let mut pool = PacketPool::new(512);
    let frames: Vec<Vec<u8>> = (0..300).map(frame).collect();
    let mut sent = 0;
    let mut got = Vec::new();
    for chunk in frames.chunks(20) {
        sent += send(&mut client, &mut pool, chunk);
        got.extend(receive(&mut server, &mut pool, chunk.len()));
    }
    assert_eq!(sent, 300);
    assert_eq!(got, frames, "client to server: every byte, in order");
    assert_eq!(RxPort::stats(&server).packets, 300);

    let mut back = Vec::new();
    for chunk in frames.chunks(20) {
        assert_eq!(send(&mut server, &mut pool, chunk), chunk.len() as u64);
        back.extend(receive(&mut client, &mut pool, chunk.len()));
    }
    assert_eq!(back, frames, "server to client: every byte, in order");
    assert_eq!(RxPort::stats(&client).dropped + RxPort::stats(&server).dropped, 0);
    assert!(pool.available() == 512, "every buffer back in the pool");
}

#[test]
fn a_full_ring_refuses_what_it_cannot_hold_and_counts_it() {
    let dir = tempfile::tempdir().unwrap();
    // 16 slots of 2048 B: 16 small frames fit, then the ring is full.
    let (_si, mut server, _ci, mut client) = pair(dir.path(), 2048, 4);
    let mut pool = PacketPool::new(128);
    let frames: Vec<Vec<u8>> = (0..40)
        .map(|i| frame(i * 15))
        .filter(|f| f.len() <= 2048)
        .take(24)
        .collect();
    assert_eq!(send(&mut client, &mut pool, &frames), 16);
    let s = TxPort::stats(&client);
    assert_eq!((s.packets, s.dropped), (16, 8), "sent and dropped make up the batch");
    assert_eq!(counter(&client, false, "tx_ring_full"), 8);
    assert_eq!(receive(&mut server, &mut pool, 16), frames[..16].to_vec());
    // Room again once the server released the slots.
    assert_eq!(send(&mut client, &mut pool, &frames[16..]), 8);
    assert_eq!(receive(&mut server, &mut pool, 8), frames[16..].to_vec());
}

#[test]
fn a_client_that_leaves_and_comes_back_is_served_again_and_the_loss_counted() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("memif.sock");
    let mut server = Interface::open(&settings(&socket, Role::Server, 2048, 6)).unwrap();
    let mut s = server.port(0, true, true).unwrap();
    let mut pool = PacketPool::new(256);
    let frames: Vec<Vec<u8>> = (0..10).map(frame).collect();
    for round in 0..2u64 {
        let mut client = Interface::open(&settings(&socket, Role::Client, 2048, 6)).unwrap();
        client.wait_connected(Duration::from_secs(10)).unwrap();
        let mut c = client.port(0, true, true).unwrap();
        assert_eq!(send(&mut c, &mut pool, &frames), 10);
        assert_eq!(receive(&mut s, &mut pool, 10), frames, "round {round}");
        // The server sends 10 the client never reads: they are in flight when it goes.
        assert_eq!(send(&mut s, &mut pool, &frames), 10);
        drop(c);
        drop(client);
        let started = Instant::now();
        while server.connected() {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the server saw the client go"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // While no one is connected, what the server sends is dropped as such.
        assert_eq!(send(&mut s, &mut pool, &frames[..3]), 0);
        assert_eq!(counter(&s, false, "tx_no_peer"), 3 * (round + 1));
        assert_eq!(counter(&s, false, "tx_in_flight_at_disconnect"), 10 * (round + 1));
    }
    assert_eq!(counter(&s, true, "connects"), 2);
    let t = TxPort::stats(&s);
    assert_eq!((t.packets, t.dropped), (20, 6));
    assert_eq!(
        TxPort::drops(&s),
        vec![("ring-full", 0), ("no-peer", 6), ("bad-descriptor", 0)],
        "the refused frames by cause add up to the port's drops"
    );
}

#[test]
fn a_sleeping_receiver_is_woken_by_the_sender_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("memif.sock");
    let mut server = Interface::open(&MemifSettings {
        wait: Wait::Interrupt {
            spin: Duration::from_micros(50),
        },
        ..settings(&socket, Role::Server, 2048, 8)
    })
    .unwrap();
    let mut client = Interface::open(&settings(&socket, Role::Client, 2048, 8)).unwrap();
    client.wait_connected(Duration::from_secs(10)).unwrap();
    server.wait_connected(Duration::from_secs(10)).unwrap();
    let mut s = server.port(0, true, false).unwrap();
    let mut c = client.port(0, false, true).unwrap();
    let receiver = std::thread::spawn(move || {
        let mut pool = PacketPool::new(256);
        let got = receive_long(&mut s, &mut pool, 50);
        (got, counter(&s, true, "sleeps"), counter(&s, true, "wakeups"))
    });
    let mut pool = PacketPool::new(256);
    let frames: Vec<Vec<u8>> = (0..50).map(frame).collect();
    for f in frames.chunks(5) {
        // Long enough for the receiver to fall asleep between bursts.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(send(&mut c, &mut pool, f), 5);
    }
    let (got, sleeps, wakeups) = receiver.join().unwrap();
    assert_eq!(got, frames);
    assert!(sleeps >= 5 && wakeups >= 5, "slept {sleeps}, woken {wakeups}");
    assert!(counter(&c, false, "interrupts_sent") >= 5);
}

/// As `receive`, with patience for a sender that pauses.
fn receive_long(port: &mut MemifPort, pool: &mut PacketPool, want: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut batch = Batch::new(64);
    let started = Instant::now();
    while got.len() < want && started.elapsed() < Duration::from_secs(10) {
        port.rx(0, pool, &mut batch);
        got.extend(batch.iter().map(|p| p.data().to_vec()));
        pool.free_batch(&mut batch);
    }
    got
}

#[test]
fn a_peer_writing_descriptors_outside_its_memory_costs_frames_not_safety() {
    use sfclab_io::memif::connection::join;
    use sfclab_io::memif::control::Channel;
    use sfclab_io::memif::layout::{DESC_FLAG_NEXT, Desc};
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("memif.sock");
    let mut server = Interface::open(&settings(&socket, Role::Server, 2048, 4)).unwrap();
    let mut s = server.port(0, true, true).unwrap();
    // A hand-driven client: it writes descriptors as it likes.
    let channel = Channel::connect(&socket).unwrap();
    let conn = join(&channel, &Config::default(), None).unwrap();
    server.wait_connected(Duration::from_secs(10)).unwrap();
    let ring = &conn.tx[0].ring;
    let region = conn.regions[0].len() as u32;
    let good = ring.desc(3);
    let descs = [
        Desc {
            offset: region - 10,
            length: 60,
            ..good
        }, // runs past the region's end
        Desc { region: 9, ..good },  // a region never added
        Desc { length: 60, ..good }, // fine
        Desc {
            flags: DESC_FLAG_NEXT,
            length: 1500,
            ..good
        },
        Desc { length: 1500, ..good }, // 3000 B: larger than a packet
    ];
    for (k, d) in descs.iter().enumerate() {
        ring.set_desc(k as u16, *d);
    }
    ring.head().store(descs.len() as u16, Ordering::Release);
    let mut pool = PacketPool::new(64);
    let got = receive(&mut s, &mut pool, 1);
    assert_eq!(got.len(), 1, "the one good frame");
    let st = RxPort::stats(&s);
    assert_eq!((st.packets, st.dropped), (4, 3), "taken in: 4 frames, 3 dropped");
    assert_eq!(
        RxPort::drops(&s),
        vec![("bad-descriptor", 2), ("oversize", 1), ("unread-at-end", 0)]
    );
    assert_eq!(ring.tail().load(Ordering::Acquire), 5, "every slot released");
}

#[test]
fn each_queue_pair_carries_its_own_frames() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("memif.sock");
    let two = |role| MemifSettings {
        config: Config {
            queue_pairs: 2,
            log2_ring_size: 6,
            ..Config::default()
        },
        ..MemifSettings::new(&socket, role)
    };
    let mut server = Interface::open(&two(Role::Server)).unwrap();
    let mut client = Interface::open(&two(Role::Client)).unwrap();
    client.wait_connected(Duration::from_secs(10)).unwrap();
    server.wait_connected(Duration::from_secs(10)).unwrap();
    let mut pool = PacketPool::new(256);
    let mut sent = Vec::new();
    let mut got = Vec::new();
    for q in 0..2u16 {
        let mut tx = client.port(q, false, true).unwrap();
        let mut rx = server.port(q, true, false).unwrap();
        let frames: Vec<Vec<u8>> = (0..10).map(|i| frame(i + 100 * usize::from(q))).collect();
        assert_eq!(send(&mut tx, &mut pool, &frames), 10);
        sent.push(frames);
        got.push(receive(&mut rx, &mut pool, 20));
    }
    assert_eq!(got, sent, "queue 0's frames on queue 0, queue 1's on queue 1");
    let e = client.port(0, false, true).err().unwrap();
    assert!(e.contains("taken by another port"), "{e}");
    assert!(client.port(2, true, false).err().unwrap().contains("queue 2 of 2"));
}

#[test]
fn frames_left_unread_when_the_run_ends_are_taken_and_counted_as_dropped() {
    let dir = tempfile::tempdir().unwrap();
    // 512-byte buffers: the longer frames take several descriptors, still one frame each.
    let (_si, mut server, _ci, mut client) = pair(dir.path(), 512, 8);
    let mut pool = PacketPool::new(512);
    // Each way: 40 frames sent, 10 read, then the run ends with 30 on the ring.
    left_unread(&mut client, &mut server, &mut pool);
    left_unread(&mut server, &mut client, &mut pool);
}

fn left_unread(sender: &mut MemifPort, receiver: &mut MemifPort, pool: &mut PacketPool) {
    let frames: Vec<Vec<u8>> = (0..40).map(frame).collect();
    assert_eq!(send(sender, pool, &frames), 40);
    let mut batch = Batch::new(10);
    let mut read = 0;
    while read < 10 {
        read += receiver.rx(0, pool, &mut batch);
    }
    pool.free_batch(&mut batch);
    let before = RxPort::stats(receiver);
    receiver.discard_unread();
    let after = RxPort::stats(receiver);
    assert_eq!(after.packets - before.packets, 30, "taken in");
    assert_eq!(after.dropped - before.dropped, 30, "and dropped");
    assert!(RxPort::drops(receiver).contains(&("unread-at-end", 30)));
    assert_eq!(counter(receiver, true, "rx_unread_at_end"), 30);
    // Nothing is counted twice, and the ring is the sender's again: more than a ring's
    // worth of slots, in all, goes through.
    receiver.discard_unread();
    assert_eq!(RxPort::stats(receiver).dropped, after.dropped);
    assert_eq!(receiver.rx(0, pool, &mut batch), 0);
    let more: Vec<Vec<u8>> = (0..200).map(|i| frame(i % 3)).collect();
    assert_eq!(send(sender, pool, &more), 200);
    assert_eq!(receive(receiver, pool, 200), more);
    assert_eq!(counter(receiver, true, "rx_unread_at_end"), 30);
}

#[test]
fn a_hop_between_two_interfaces_forwards_both_ways_and_either_side_wakes_it() {
    use sfclab_io::memif::{BothWaysIn, BothWaysOut};
    let dir = tempfile::tempdir().unwrap();
    let interrupt = Wait::Interrupt {
        spin: Duration::from_micros(50),
    };
    // The hop serves its input (west) and connects its output (east) to the far tester.
    let (west, east) = (dir.path().join("west.sock"), dir.path().join("east.sock"));
    let mut hop_in = Interface::open(&MemifSettings {
        wait: interrupt,
        ..settings(&west, Role::Server, 2048, 8)
    })
    .unwrap();
    let mut far = Interface::open(&settings(&east, Role::Server, 2048, 8)).unwrap();
    let mut near = Interface::open(&settings(&west, Role::Client, 2048, 8)).unwrap();
    let mut hop_out = Interface::open(&MemifSettings {
        wait: interrupt,
        ..settings(&east, Role::Client, 2048, 8)
    })
    .unwrap();
    for i in [&mut hop_in, &mut far, &mut near, &mut hop_out] {
        i.wait_connected(Duration::from_secs(10)).unwrap();
    }
    let mut hop_rx = BothWaysIn::new(
        hop_in.port(0, true, false).unwrap(),
        hop_out.port(0, true, false).unwrap(),
    );
    let mut hop_tx = BothWaysOut::new(
        hop_in.port(0, false, true).unwrap(),
        hop_out.port(0, false, true).unwrap(),
    );
    const EACH: usize = 60;
    let hop = std::thread::spawn(move || {
        let mut pool = PacketPool::new(256);
        let mut batch = Batch::new(32);
        let (mut sides, started) = ([0u64; 2], Instant::now());
        while (sides[0] as usize) < EACH || (sides[1] as usize) < EACH {
            assert!(started.elapsed() < Duration::from_secs(10), "the hop got {sides:?}");
            hop_rx.rx(0, &mut pool, &mut batch);
            for p in batch.iter() {
                sides[usize::from(p.meta.in_port)] += 1;
            }
            hop_tx.tx(0, &mut batch, &mut pool);
        }
        let value = |c: Vec<sfclab_core::NfCounter>, name: &str| c.iter().find(|c| c.name == name).unwrap().value;
        let rx = RxPort::counters(&hop_rx);
        let tx = TxPort::counters(&hop_tx);
        (
            sides,
            [value(rx.clone(), "forward_in"), value(rx.clone(), "reverse_in")],
            [value(tx.clone(), "forward_out"), value(tx, "reverse_out")],
            value(rx, "wakeups"),
        )
    });
    let mut forward_out = near.port(0, false, true).unwrap();
    let mut forward_back = far.port(0, true, false).unwrap();
    let mut reverse_out = far.port(0, false, true).unwrap();
    let mut reverse_back = near.port(0, true, false).unwrap();
    let mut pool = PacketPool::new(512);
    // A client's receiver hands the server its buffers when it first looks.
    assert_eq!(reverse_back.rx(0, &mut pool, &mut Batch::new(1)), 0);
    let (there, back): (Vec<Vec<u8>>, Vec<Vec<u8>>) =
        ((0..EACH).map(frame).collect(), (EACH..2 * EACH).map(frame).collect());
    // Bursts from one side at a time, long enough apart for the hop to fall asleep:
    // whichever side sends must wake it.
    for k in 0..EACH / 5 {
        std::thread::sleep(Duration::from_millis(20));
        let (port, frames) = if k % 2 == 0 {
            (&mut forward_out, &there)
        } else {
            (&mut reverse_out, &back)
        };
        let at = k / 2 * 10 % EACH;
        assert_eq!(send(port, &mut pool, &frames[at..at + 10]), 10);
    }
    let (sides, ins, outs, wakeups) = hop.join().unwrap();
    assert_eq!(sides, [EACH as u64; 2], "in_port says the side each came in on");
    assert_eq!(ins, [EACH as u64; 2]);
    assert_eq!(outs, [EACH as u64; 2]);
    assert_eq!(
        receive(&mut forward_back, &mut pool, EACH),
        there,
        "the forward way, whole and in order"
    );
    assert_eq!(receive(&mut reverse_back, &mut pool, EACH), back, "the reverse way");
    assert!(wakeups >= 5, "woken {wakeups} times by the senders");
}
