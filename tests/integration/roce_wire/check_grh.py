#!/usr/bin/python3
"""The GRH a UD receive buffer gets is the real IP header.

Usage: check_grh.py CAPTURE.pcap GRH.tsv

GRH.tsv (roce_udp_peer recv) holds, per accepted packet, its PSN and the
40-byte GRH the receiving carrier makes from what the socket told it
(addresses, ports, length, TOS/traffic class, TTL/hop limit, flow label).
The capture holds the packets as the kernel put them on the wire. As rxe
does, the GRH of an IPv6 packet is its IPv6 header and that of an IPv4
packet 20 zero bytes and then its IPv4 header: each must equal the
captured header byte for byte.
"""
import struct
import sys


def frames(path):
    """(linktype, data) of each record of a classic pcap file."""
    with open(path, "rb") as f:
        header = f.read(24)
        magic = struct.unpack("<I", header[:4])[0]
        endian = "<" if magic in (0xa1b2c3d4, 0xa1b23c4d) else ">"
        linktype = struct.unpack(endian + "I", header[20:24])[0]
        while True:
            record = f.read(16)
            if len(record) < 16:
                return
            incl = struct.unpack(endian + "IIII", record)[2]
            yield linktype, f.read(incl)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    grhs = {}
    with open(sys.argv[2]) as f:
        for line in f:
            psn, grh = line.split()
            grhs[int(psn)] = bytes.fromhex(grh)
    failures, checked = [], 0
    for linktype, data in frames(sys.argv[1]):
        if linktype == 1:
            data = data[14:]
        ipv6 = data[0] >> 4 == 6
        ip_len = 40 if ipv6 else 20
        psn = int.from_bytes(data[ip_len + 8 + 9:ip_len + 8 + 12], "big")
        grh = grhs.get(psn)
        if grh is None:
            failures.append(f"PSN {psn}: captured, but the receiver made no GRH for it")
            continue
        want = data[:40] if ipv6 else bytes(20) + data[:20]
        if grh != want:
            failures.append(f"PSN {psn} ({'IPv6' if ipv6 else 'IPv4'}): GRH {grh.hex()}, "
                            f"captured header {want.hex()}")
        checked += 1
    if checked != len(grhs):
        failures.append(f"{len(grhs)} GRHs made, {checked} packets captured")
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print(f"OK: the GRH of all {checked} packets is the captured IP header, byte for byte")
    return 0


if __name__ == "__main__":
    sys.exit(main())
