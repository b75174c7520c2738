#!/usr/bin/python3
"""The ICRC of RoCE v2 packets built by src/roce, recomputed by scapy.

Usage: check_icrc_scapy.py ROCE_WRITE_PCAP WORKDIR
       check_icrc_scapy.py --capture PCAP TSV

roce_write_pcap writes every opcode of the opcode table over IPv4 and IPv6
(or, with --capture, a capture - raw IP or Ethernet - of the packets
roce_udp_peer sent through the kernel and their table are given; frames are
matched to the table by PSN, each exactly once).
For every IPv4 frame, scapy's RoCE layer (scapy.contrib.roce, BTH.compute_icrc)
recomputes the ICRC, which must equal the one we wrote. scapy 2.5's
compute_icrc handles IPv4 only, so for IPv6 this script masks the variant
fields with scapy's IPv6 layer (traffic class, flow label, hop limit; UDP
checksum; BTH FECN/BECN/reserved: as compute_icrc does for IPv4 and as
IBA A17.2.8 says) and takes zlib's CRC-32 the same way. scapy also checks
every frame's BTH opcode against the table we wrote. Exits 77 (SKIP)
without python3-scapy.
"""
import csv
import os
import subprocess
import sys
import zlib

try:
    from scapy.compat import raw
    from scapy.contrib.roce import BTH
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.packet import Raw
    from scapy.utils import RawPcapReader
except ImportError as e:
    print(f"SKIP: python3-scapy is not installed ({e}; scripts/install-deps.sh installs it)")
    sys.exit(77)


def ipv6_icrc(pkt):
    """IBA A17.2.8 over IPv6, with scapy doing the masking."""
    masked = pkt.copy()
    masked[IPv6].tc = 0xff
    masked[IPv6].fl = 0xfffff
    masked[IPv6].hlim = 0xff
    masked[UDP].chksum = 0xffff
    masked[BTH].fecn = 1
    masked[BTH].becn = 1
    masked[BTH].resv6 = 0x3f
    data = raw(masked)
    crc = zlib.crc32(b"\xff" * 8 + data[:-4]) & 0xffffffff
    return crc.to_bytes(4, "little")


def main():
    if len(sys.argv) != (4 if sys.argv[1:2] == ["--capture"] else 3):
        print(__doc__)
        return 2
    if sys.argv[1] == "--capture":
        pcap, tsv = sys.argv[2:]
    else:
        writer, workdir = sys.argv[1:]
        os.makedirs(workdir, exist_ok=True)
        pcap, tsv = os.path.join(workdir, "roce.pcap"), os.path.join(workdir, "roce.tsv")
        subprocess.run([writer, pcap, tsv], check=True, capture_output=True)
    with open(tsv) as f:
        expected = list(csv.DictReader(f, delimiter="\t"))
    by_psn = {int(row["psn"]): row for row in expected}

    failures, counts = [], {False: 0, True: 0}
    reader = RawPcapReader(pcap)
    linktype = reader.linktype
    frames = []
    for data, _ in reader:
        if linktype == 1:  # Ethernet: the IP packet after the header
            if data[12:14] not in (b"\x08\x00", b"\x86\xdd"):
                continue
            data = data[14:]
        elif linktype != 101:
            print(f"FAIL: link type {linktype} is neither Ethernet nor raw IP")
            return 1
        frames.append(data)
    seen = set()
    first_ipv4 = None
    for data in frames:
        ipv6 = data[0] >> 4 == 6
        pkt = (IPv6 if ipv6 else IP)(data)
        # Ethernet's minimum frame may pad a short packet: cut at the IP length.
        data = data[:40 + pkt[IPv6].plen] if ipv6 else data[:pkt[IP].len]
        pkt = (IPv6 if ipv6 else IP)(data)
        if BTH not in pkt:
            failures.append(f"a frame without BTH: {data.hex()}")
            continue
        want = by_psn.get(pkt[BTH].psn)
        if want is None or pkt[BTH].psn in seen:
            failures.append(f"PSN {pkt[BTH].psn}: unexpected or seen twice")
            continue
        seen.add(pkt[BTH].psn)
        n, name = want["frame"], want["name"]
        if pkt[BTH].opcode != int(want["opcode"]):
            failures.append(f"frame {n}: opcode {pkt[BTH].opcode}, expected {want['opcode']}")
        if pkt[BTH].dqpn != int(want["dest_qp"]):
            failures.append(f"frame {n} ({name}): BTH dest QP differs")
        written = data[-4:]
        if not ipv6 and first_ipv4 is None:
            first_ipv4 = data
        if ipv6:
            computed = ipv6_icrc(pkt)
        else:
            computed = pkt[BTH].compute_icrc(None)
        if computed != written:
            failures.append(f"frame {n} ({name}, {'IPv6' if ipv6 else 'IPv4'}): ICRC "
                            f"{written.hex()} written, {computed.hex()} recomputed")
        counts[ipv6] += 1

    if len(seen) != len(expected):
        failures.append(f"{len(expected) - len(seen)} frames of the table were not found")
    # The check can fail: a packet with one payload bit flipped must not match.
    data = bytearray(first_ipv4 or b"")
    if data:
        data[-5] ^= 0x01
    if not data or IP(bytes(data))[BTH].compute_icrc(None) == bytes(data[-4:]):
        failures.append("a corrupted packet still matches its ICRC: the check checks nothing")

    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print(f"OK: ICRC recomputed by scapy for {counts[False]} IPv4 frames "
          f"(scapy.contrib.roce) and {counts[True]} IPv6 frames (scapy masking, zlib CRC-32)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
