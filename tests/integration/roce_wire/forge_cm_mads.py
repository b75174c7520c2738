#!/usr/bin/python3
"""Sends mutants of captured CM MADs to a host's QP 1, as anyone may (root).

Usage: forge_cm_mads.py CAPTURE.pcap SRC_IPV4 DST_IPV4 COUNT SEED

Takes the CM MADs (UD SEND Only to QP 1, Q_Key 0x80010000) the capture
holds and sends COUNT packets made from them, each with one mutation: a few
random bytes changed, the attribute (REQ, MRA, REJ, REP, RTU, DREQ, DREP,
SIDR REQ/REP, LAP, APR or any number) changed, the communication IDs made
small numbers (those of live ids), or the whole attribute payload random.
Each goes in an IPv4 packet from SRC to DST with an ICRC scapy's RoCE layer
makes for its IPv4 ID (0..63: IDs a device's own packets carry, so the
receiving carrier takes each without a history of the source). Prints how
many it sent; SKIP (77) without scapy.
"""
import logging
import random
import sys

logging.getLogger("scapy.runtime").setLevel(logging.ERROR)

try:
    from scapy.all import IP, UDP, Raw, rdpcap, send
    from scapy.contrib.roce import BTH
except ImportError as e:
    print(f"SKIP: python3-scapy is not installed ({e})")
    sys.exit(77)

GSI_QKEY = 0x80010000
MAD_BYTES = 256
CM_CLASS = 0x07
CM_ATTRIBUTES = [0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1A]
UD_SEND_ONLY = 0x64


def captured_mads(path):
    """The CM MADs in a capture (UDP payload: BTH, DETH, MAD, ICRC)."""
    mads = []
    for pkt in rdpcap(path):
        if UDP not in pkt or pkt[UDP].dport != 4791:
            continue
        roce = bytes(pkt[UDP].payload)
        if len(roce) < 12 + 8 + MAD_BYTES + 4 or roce[0] != UD_SEND_ONLY:
            continue
        if int.from_bytes(roce[5:8], "big") != 1:  # BTH destination QP
            continue
        mad = roce[20:20 + MAD_BYTES]
        if mad[1] == CM_CLASS:
            mads.append(bytearray(mad))
    return mads


def mutate(rng, mad):
    m = bytearray(mad)
    kind = rng.randrange(4)
    if kind == 0:  # a few bytes anywhere
        for _ in range(rng.randint(1, 16)):
            m[rng.randrange(MAD_BYTES)] = rng.randrange(256)
    elif kind == 1:  # another attribute, same body
        attr = rng.choice(CM_ATTRIBUTES + [rng.randrange(0x10000)])
        m[16:18] = attr.to_bytes(2, "big")
    elif kind == 2:  # the communication IDs of live ids (small numbers)
        m[24:28] = rng.randrange(64).to_bytes(4, "big")
        m[28:32] = rng.randrange(64).to_bytes(4, "big")
    else:  # any attribute payload
        m[24:] = bytes(rng.randrange(256) for _ in range(MAD_BYTES - 24))
    return bytes(m)


def main():
    if len(sys.argv) != 6:
        print(__doc__)
        return 2
    path, src, dst, count, seed = sys.argv[1:]
    rng = random.Random(int(seed))
    mads = captured_mads(path)
    if not mads:
        print(f"FAIL: no CM MAD in {path}")
        return 1
    deth = GSI_QKEY.to_bytes(4, "big") + b"\0" + (1).to_bytes(3, "big")
    frames = []
    for i in range(int(count)):
        body = deth + mutate(rng, rng.choice(mads))
        frames.append(IP(src=src, dst=dst, id=i % 64, flags="DF", ttl=64)
                      / UDP(sport=0xc0de, dport=4791, chksum=0)
                      / BTH(opcode=UD_SEND_ONLY, dqpn=1, psn=i & 0xffffff, pkey=0xffff)
                      / Raw(body))
    send(frames, verbose=False)
    print(f"sent {len(frames)} forged CM MADs made from {len(mads)} captured ones")
    return 0


if __name__ == "__main__":
    sys.exit(main())
