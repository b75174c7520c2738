#!/usr/bin/python3
"""A capture of the network transport's real traffic, checked by tshark and scapy.

Usage: check_transport_capture.py PCAP OPCODE[,OPCODE...] [gso]

Every frame of PCAP (raw Ethernet, UDP port 4791: what two softverbs devices
said to each other while a program ran) must decode in tshark's InfiniBand
dissector with no malformed packet and no error, the BTH opcodes tshark sees
must include every one listed (decimal), and scapy's RoCE layer must
recompute the ICRC of every IPv4 frame as written. A frame with one bit
flipped must fail that check (the check can fail). With "gso", some IPv4
frames must carry an ID other than 0: segments of UDP GSO runs, whose ICRCs
scapy recomputed over their real IP headers. Exits 77 (SKIP) without
tshark or python3-scapy.
"""
import collections
import shutil
import subprocess
import sys

try:
    from scapy.contrib.roce import BTH
    from scapy.layers.inet import IP
    from scapy.utils import RawPcapReader
except ImportError as e:
    print(f"SKIP: python3-scapy is not installed ({e})")
    sys.exit(77)

TSHARK_ARGS = ["--disable-protocol", "rpcordma"]


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def main():
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] != "gso"):
        print(__doc__)
        return 2
    pcap, wanted = sys.argv[1], {int(x) for x in sys.argv[2].split(",")}
    want_gso = len(sys.argv) == 4
    tshark = shutil.which("tshark")
    if not tshark:
        print("SKIP: tshark is not installed")
        return 77
    failures = []
    bad = run([tshark, "-r", pcap, *TSHARK_ARGS, "-Y",
               "_ws.malformed || _ws.expert.severity == error"]).strip()
    if bad:
        failures.append("malformed or erroneous frames:\n" + "\n".join(bad.splitlines()[:20]))
    opcodes = run([tshark, "-r", pcap, *TSHARK_ARGS, "-T", "fields", "-e",
                   "infiniband.bth.opcode"]).split()
    seen = collections.Counter(int(o, 0) for o in opcodes if o)
    undecoded = len(opcodes) - sum(seen.values())
    print(f"tshark: {len(opcodes)} frames, opcodes {dict(sorted(seen.items()))}")
    if not opcodes:
        failures.append("the capture holds no frame")
    if undecoded:
        failures.append(f"{undecoded} frames tshark did not decode as InfiniBand")
    missing = wanted - set(seen)
    if missing:
        failures.append(f"opcodes never seen: {sorted(missing)}")

    checked, first, numbered = 0, None, 0
    for data, _ in RawPcapReader(pcap):
        if data[12:14] != b"\x08\x00":
            continue  # IPv6 frames: tshark above; scapy 2.5 computes IPv4 ICRCs only
        data = data[14:]
        pkt = IP(data)
        data = data[:pkt[IP].len]
        pkt = IP(data)
        if BTH not in pkt:
            failures.append(f"a frame without BTH: {data.hex()}")
            continue
        if pkt[BTH].compute_icrc(None) != data[-4:]:
            failures.append(f"PSN {pkt[BTH].psn} opcode {pkt[BTH].opcode}: ICRC differs")
        checked += 1
        numbered += pkt[IP].id != 0
        first = first or data
    print(f"scapy: {checked} IPv4 ICRCs recomputed, {numbered} of frames with an IPv4 ID other than 0")
    if want_gso and numbered == 0:
        failures.append("no frame with an IPv4 ID other than 0: no GSO run was cut into segments")
    if checked == 0:
        failures.append("no IPv4 frame to check the ICRC of")
    flipped = bytearray(first or b"")
    if flipped:
        flipped[-5] ^= 0x01
    if not flipped or IP(bytes(flipped))[BTH].compute_icrc(None) == bytes(flipped[-4:]):
        failures.append("a corrupted packet still matches its ICRC: the check checks nothing")
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print("OK: every frame decodes in tshark's InfiniBand dissector and every ICRC matches scapy's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
