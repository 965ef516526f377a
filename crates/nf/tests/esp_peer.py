#!/usr/bin/python3
"""An independent ESP peer for the interop test (tests/esp_interop.rs): Scapy's
SecurityAssociation (AES-GCM from python3-cryptography), tunnel mode.

  esp_peer.py decrypt KEY SPI ESN IN.pcap
      Decrypts every frame of IN.pcap (Ethernet, outer IPv4, ESP); prints one line per
      frame: the inner datagram in hex, or `FAIL <why>`.
  esp_peer.py encrypt KEY SPI ESN IN.pcap OUT.pcap SEQ...
      Encrypts the IP datagram of every frame of IN.pcap with the next SEQ (a 64-bit
      number; with ESN its high half goes into the ICV only), tunnel 192.0.2.1 ->
      192.0.2.2, the Ethernet header kept; writes OUT.pcap.

KEY is the AES key and the 4-byte salt in hex, as `ip xfrm` takes it; ESN is 0 or 1.
"""

import sys

from scapy.layers.inet import IP
from scapy.layers.inet6 import IPv6
from scapy.layers.ipsec import ESP, SecurityAssociation
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap, wrpcap


def association(key, spi, esn):
    return SecurityAssociation(
        ESP,
        spi=int(spi, 0),
        crypt_algo="AES-GCM",
        crypt_key=bytes.fromhex(key.removeprefix("0x")),
        tunnel_header=IP(src="192.0.2.1", dst="192.0.2.2"),
        esn_en=esn == "1",
        esn=0,
    )


def decrypt(key, spi, esn, path):
    sa = association(key, spi, esn)
    for frame in rdpcap(path):
        try:
            inner = sa.decrypt(Ether(bytes(frame))[IP])
            print(bytes(inner).hex())
        except Exception as e:  # noqa: BLE001: the line says why, the test decides
            print("FAIL", type(e).__name__, str(e).replace("\n", " "))


def encrypt(key, spi, esn, path, out, seqs):
    sa = association(key, spi, esn)
    frames = rdpcap(path)
    if len(seqs) != len(frames):
        sys.exit(f"{len(frames)} frames but {len(seqs)} sequence numbers")
    sealed = []
    for frame, seq in zip(frames, seqs):
        eth = Ether(bytes(frame))
        datagram = eth[IPv6] if IPv6 in eth else eth[IP]
        high, low = seq >> 32, seq & 0xFFFFFFFF
        esp = sa.encrypt(datagram, seq_num=low, esn_en=esn == "1", esn=high)
        sealed.append(Ether(src=eth.src, dst=eth.dst, type=0x0800) / esp)
    wrpcap(out, sealed)


if __name__ == "__main__":
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "decrypt":
        decrypt(*rest)
    elif mode == "encrypt":
        encrypt(*rest[:5], [int(s, 0) for s in rest[5:]])
    else:
        sys.exit(__doc__)
