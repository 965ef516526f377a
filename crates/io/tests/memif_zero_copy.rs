//! A zero-copy memif client (its packet pool in shared memory, frames passed by
//! reference) against an sfclab server that copies: frames both ways whole and in
//! order, every buffer back in the pool, frames of another pool copied, a server that
//! leaves with frames lent to it, and a server that breaks the protocol.

use sfclab_core::packet::{DATA_ROOM, HEADROOM};
use sfclab_core::{Batch, PacketPool, RxPort, TxPort};
use sfclab_io::memif::{Config, Interface, MemifPort, MemifSettings, Role};
use std::path::Path;
use std::time::{Duration, Instant};

mod common;
use common::{counter, frame, send};

fn settings(socket: &Path, role: Role, log2: u8) -> MemifSettings {
    MemifSettings {
        config: Config {
            log2_ring_size: log2,
            ..Config::default()
        },
        zero_copy: role == Role::Client,
        ..MemifSettings::new(socket, role)
    }
}

/// A zero-copy client's interface and port (both ways), its pool attached and
/// connected to whatever serves `socket`.
fn zero_copy_client(socket: &Path, log2: u8, pool: &PacketPool) -> (Interface, MemifPort) {
    let mut client = Interface::open(&settings(socket, Role::Client, log2)).unwrap();
    let mut c = client.port(0, true, true).unwrap();
    assert_eq!(RxPort::shared_pool_need(&c), Some(2 << log2), "a ring each way");
    let e = client.wait_connected(Duration::from_millis(100)).unwrap_err();
    assert!(e.contains("no packet pool in shared memory attached yet"), "{e}");
    RxPort::attach_pool(&mut c, pool);
    client.wait_connected(Duration::from_secs(10)).unwrap();
    (client, c)
}

/// Receives until `want` frames came or nothing comes for a while; with `pool_of`,
/// checks every frame lies in that pool's shared memory (used where the peer wrote it).
fn receive(port: &mut MemifPort, pool: &mut PacketPool, want: usize, in_place: bool) -> Vec<Vec<u8>> {
    let span = pool.shared_memory().map(|(_, span)| span);
    let mut got = Vec::new();
    let mut batch = Batch::new(64);
    let mut last = Instant::now();
    while got.len() < want && last.elapsed() < Duration::from_secs(2) {
        if port.rx(0, pool, &mut batch) > 0 {
            last = Instant::now();
        }
        for p in batch.iter() {
            if in_place {
                assert!(span.unwrap().offset_of(p.data()).is_some(), "received in place");
            }
            got.push(p.data().to_vec());
        }
        pool.free_batch(&mut batch);
    }
    got
}

#[test]
fn frames_pass_by_reference_both_ways_whole_in_order_and_every_buffer_comes_home() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("memif.sock");
    let mut server = Interface::open(&settings(&socket, Role::Server, 8)).unwrap();
    let mut s = server.port(0, true, true).unwrap();
    let mut pool = PacketPool::shared(1024, "sfclab-test").unwrap();
    let mut server_pool = PacketPool::new(256);
    let (_ci, mut c) = zero_copy_client(&socket, 8, &pool);
    server.wait_connected(Duration::from_secs(10)).unwrap();
    assert_eq!(TxPort::info(&c).settings["zero_copy"], "yes");
    let frames: Vec<Vec<u8>> = (0..600).map(frame).collect();

    // A frame of another pool cannot be lent: it is copied into the ring's own buffer.
    let mut private = PacketPool::new(16);
    assert_eq!(send(&mut c, &mut private, &frames[..10]), 10);
    assert_eq!(receive(&mut s, &mut server_pool, 10, false), frames[..10].to_vec());
    assert_eq!(private.available(), 16, "a copied frame's buffer is back at once");

    let (mut sent, mut got) = (0, Vec::new());
    for chunk in frames.chunks(40) {
        sent += send(&mut c, &mut pool, chunk);
        // Lent, not copied: the chunk's buffers wait on the ring for the server (the
        // chunk before came home as this one went).
        assert_eq!(pool.in_use(), chunk.len(), "the frames sent are lent to the server");
        got.extend(receive(&mut s, &mut server_pool, chunk.len(), false));
    }
    assert_eq!(sent, 600);
    assert_eq!(got, frames, "client to server by reference: every byte, in order");

    // The client gives its receive ring pool buffers as it receives (the receive has
    // the pool): until its first look, the server has no room.
    let mut batch = Batch::new(32);
    assert_eq!(c.rx(0, &mut pool, &mut batch), 0);
    assert_eq!(pool.in_use(), 256 + 40, "a ring given, the last chunk still lent");
    let mut back = Vec::new();
    for chunk in frames.chunks(40) {
        assert_eq!(send(&mut s, &mut server_pool, chunk), chunk.len() as u64);
        back.extend(receive(&mut c, &mut pool, chunk.len(), true));
    }
    assert_eq!(back, frames, "server to client, in place: every byte, in order");
    assert_eq!(RxPort::stats(&c).dropped + RxPort::stats(&s).dropped, 0);
    assert_eq!(TxPort::stats(&c).dropped + TxPort::stats(&s).dropped, 0);

    // The receive ring holds a ring of the pool's buffers; the send ring what the
    // server has not released. All of it comes home once traffic is over.
    assert!(pool.in_use() >= 256, "the receive ring's buffers are lent");
    RxPort::return_buffers(&mut c, &mut pool);
    assert_eq!(pool.available(), 1024, "every buffer back in the pool");
    assert_eq!(server_pool.available(), 256);
}

#[test]
fn a_server_that_leaves_with_frames_lent_to_it_costs_those_frames_and_no_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("memif.sock");
    let mut pool = PacketPool::shared(512, "sfclab-test").unwrap();
    let mut server_pool = PacketPool::new(256);
    let frames: Vec<Vec<u8>> = (0..10).map(frame).collect();
    let mut server = Interface::open(&settings(&socket, Role::Server, 6)).unwrap();
    let (_ci, mut c) = zero_copy_client(&socket, 6, &pool);
    let mut offered = 0;
    for round in 0..2u64 {
        server.wait_connected(Duration::from_secs(10)).unwrap();
        let mut s = server.port(0, true, true).unwrap();
        assert_eq!(send(&mut c, &mut pool, &frames), 10);
        assert_eq!(receive(&mut s, &mut server_pool, 10, false), frames, "round {round}");
        // Lent to the server and never read: in flight when it goes.
        assert_eq!(send(&mut c, &mut pool, &frames), 10);
        offered += 20;
        drop(s);
        drop(server);
        let started = Instant::now();
        // A send notices the server is gone (and is refused: no peer).
        while counter(&c, false, "tx_in_flight_at_disconnect") < 10 * (round + 1) {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the client saw the server go"
            );
            std::thread::sleep(Duration::from_millis(5));
            send(&mut c, &mut pool, &frames[..1]);
            offered += 1;
        }
        assert_eq!(counter(&c, false, "tx_in_flight_at_disconnect"), 10 * (round + 1));
        server = Interface::open(&settings(&socket, Role::Server, 6)).unwrap();
    }
    server.wait_connected(Duration::from_secs(10)).unwrap();
    let t = TxPort::stats(&c);
    assert_eq!(
        t.packets + t.dropped,
        offered,
        "every frame offered was sent or refused"
    );
    assert_eq!(t.packets, 40);
    // A receive takes back what the last connections held; then everything comes home.
    let mut batch = Batch::new(32);
    c.rx(0, &mut pool, &mut batch);
    pool.free_batch(&mut batch);
    RxPort::return_buffers(&mut c, &mut pool);
    assert_eq!(pool.available(), 512, "every buffer back in the pool");
}

/// A hand-driven server on `socket`, which writes the client's memory as it likes, and
/// a zero-copy client of it with rings of 2^`log2` and `pool`: the server's channel
/// (kept open) and connection, the client's interface and port.
fn hand_driven_server(
    socket: &Path,
    log2: u8,
    pool: &PacketPool,
) -> (
    (
        sfclab_io::memif::control::Channel,
        sfclab_io::memif::connection::Connection,
    ),
    (Interface, MemifPort),
) {
    use sfclab_io::memif::connection::serve;
    use sfclab_io::memif::control::Listener;
    let listener = Listener::bind(socket).unwrap();
    let serving = std::thread::spawn(move || {
        let channel = listener.accept().unwrap();
        let conn = serve(&channel, &Config::default()).unwrap();
        (channel, conn)
    });
    let client = zero_copy_client(socket, log2, pool);
    (serving.join().unwrap(), client)
}

#[test]
fn a_server_that_breaks_the_protocol_costs_frames_not_safety_and_no_buffer() {
    use sfclab_io::memif::layout::{DESC_FLAG_NEXT, Desc};
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("memif.sock");
    let mut pool = PacketPool::shared(2048, "sfclab-test").unwrap();
    let ((_channel, conn), (_ci, mut c)) = hand_driven_server(&socket, 4, &pool);
    // The client gives its receive ring pool buffers at its first receive.
    let mut batch = Batch::new(64);
    assert_eq!(c.rx(0, &mut pool, &mut batch), 0);
    let ring = &conn.tx[0].ring;
    assert_eq!(ring.head().load(Ordering::Acquire), 16, "a ring of buffers given");
    let pool_region = &conn.regions[1];
    let given = ring.desc(0);
    assert_eq!((given.region, given.length as usize), (1, DATA_ROOM));
    // Garbage over every given buffer's room, headroom included.
    let junk = vec![0xa5u8; HEADROOM + DATA_ROOM];
    for k in 0..16 {
        assert!(pool_region.write(ring.desc(k).offset as usize - HEADROOM, &junk));
    }
    let descs = [
        Desc {
            length: 60,
            ..ring.desc(0)
        }, // fine
        Desc {
            length: DATA_ROOM as u32 + 1,
            ..ring.desc(1)
        }, // longer than the buffer
        Desc {
            flags: DESC_FLAG_NEXT,
            length: 1500,
            ..ring.desc(2)
        },
        Desc {
            length: 1500,
            ..ring.desc(3)
        }, // 3000 B in two: larger than a packet
        Desc {
            flags: DESC_FLAG_NEXT,
            length: 100,
            ..ring.desc(4)
        },
        Desc {
            length: 40,
            ..ring.desc(5)
        }, // 140 B in two: fits, comes together
    ];
    for (k, d) in descs.iter().enumerate() {
        ring.set_desc(k as u16, *d);
    }
    // A tail far past what the client gave: only the given slots count.
    ring.tail().store(6, Ordering::Release);
    let got = c.rx(0, &mut pool, &mut batch);
    assert_eq!(got, 2, "the good frame and the two-part one");
    assert_eq!(batch.get_mut(0).data(), &[0xa5; 60][..]);
    assert_eq!(batch.get_mut(1).data(), &[0xa5; 140][..]);
    pool.free_batch(&mut batch);
    let st = RxPort::stats(&c);
    assert_eq!((st.packets, st.dropped), (4, 2));
    assert_eq!(
        RxPort::drops(&c),
        vec![("bad-descriptor", 0), ("oversize", 2), ("unread-at-end", 0)]
    );
    ring.tail().store(6 + 1000, Ordering::Release);
    assert!(c.rx(0, &mut pool, &mut batch) <= 16, "never more than the ring gave");
    pool.free_batch(&mut batch);
    RxPort::return_buffers(&mut c, &mut pool);
    assert_eq!(pool.available(), 2048, "every buffer back in the pool");
    // The buffers work as ever: the pool gives fresh frames whatever was written.
    let mut all: Vec<_> = (0..2048).map(|_| pool.alloc().unwrap()).collect();
    for p in &mut all {
        assert!(p.is_empty() && p.headroom() == HEADROOM);
        p.reset(64).fill(1);
    }
    all.into_iter().for_each(|p| pool.free(p));
}

mod hostile {
    use super::*;
    use proptest::prelude::*;
    use sfclab_io::memif::layout::{DESC_FLAG_NEXT, Desc};
    use std::sync::atomic::Ordering;

    /// One move of a server that writes the client's receive ring as it likes: a
    /// descriptor's flags and length at a slot, or its tail moved on by some.
    #[derive(Debug, Clone)]
    enum Move {
        Desc { slot: u16, next: bool, length: u32 },
        Tail(u16),
    }

    fn moves() -> impl Strategy<Value = Vec<Move>> {
        let one = prop_oneof![
            (0u16..64, any::<bool>(), prop_oneof![0u32..2000, any::<u32>()])
                .prop_map(|(slot, next, length)| Move::Desc { slot, next, length }),
            prop_oneof![0u16..40, any::<u16>()].prop_map(Move::Tail),
        ];
        prop::collection::vec(one, 1..60)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Whatever the server writes, the client takes only whole frames that fit a
        /// buffer and lie in its pool, counts every other as dropped, and gets every
        /// buffer back.
        #[test]
        fn a_zero_copy_client_survives_any_descriptors_and_tails(moves in moves()) {
            let dir = tempfile::tempdir().unwrap();
            let socket = dir.path().join("memif.sock");
            let mut pool = PacketPool::shared(512, "sfclab-test").unwrap();
            let ((_channel, conn), (_ci, mut c)) = hand_driven_server(&socket, 5, &pool);
            let span = pool.shared_memory().unwrap().1;
            let ring = &conn.tx[0].ring;
            let mut batch = Batch::new(64);
            let (mut taken, mut tail) = (0u64, 0u16);
            for m in moves.iter().chain([Move::Tail(0)].iter()) {
                match *m {
                    Move::Desc { slot, next, length } => {
                        let d = ring.desc(slot);
                        ring.set_desc(slot, Desc { flags: u16::from(next) * DESC_FLAG_NEXT, length, ..d });
                    }
                    Move::Tail(n) => {
                        tail = tail.wrapping_add(n);
                        ring.tail().store(tail, Ordering::Release);
                    }
                }
                let got = c.rx(0, &mut pool, &mut batch);
                prop_assert_eq!(got, batch.len());
                for p in batch.iter() {
                    prop_assert!(p.len() <= DATA_ROOM);
                    prop_assert!(span.offset_of(p.data()).is_some(), "a frame in the pool");
                }
                taken += got as u64;
                pool.free_batch(&mut batch);
            }
            let st = RxPort::stats(&c);
            prop_assert_eq!(st.packets - st.dropped, taken, "every frame taken or dropped");
            let dropped: u64 = RxPort::drops(&c).iter().map(|d| d.1).sum();
            prop_assert_eq!(dropped, st.dropped, "each drop has its cause");
            RxPort::return_buffers(&mut c, &mut pool);
            prop_assert_eq!(pool.available(), 512, "every buffer back in the pool");
        }
    }
}
