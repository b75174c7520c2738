#!/usr/bin/python3
"""Sends RoCE v2 packets as rxe does, built by scapy (root: a raw socket).

Usage: send_as_rxe.py v4 SRC_IPV4 DST_IPV4
       send_as_rxe.py v6 SRC_IPV6 DST_IPV6 IFACE DST_MAC

v4: each packet with an IPv4 ID from a counter (the kernel's
__ip_select_ident), not one of the 0..63 softverbs' own packets carry, and
an ICRC made for that ID by scapy's RoCE layer. In order, from ID 0x4d20
(X): a UD SEND to QP 1 (a CM MAD's packet) with ID X; RC SENDs to QP 0x12
with X+1 .. X+5; one with X+6 whose payload was changed after its ICRC was
made; then X+30000 (a jump) and X+30001.

v6: three RC SENDs to QP 0x12 with a zero UDP checksum, as rxe sends over
IPv6 (its UDP header is never checksummed: the ICRC covers the packet),
in Ethernet frames on IFACE (link-local addresses have no route for an
IP-level send). scapy 2.5's RoCE layer makes no IPv6 ICRC; it is made as
IBA A17.8 says, with scapy masking the variant fields (check_icrc_scapy.py's
ipv6_icrc, which checks the IPv6 captures too).
"""
import logging
import os
import sys

logging.getLogger("scapy.runtime").setLevel(logging.ERROR)  # no "no route" warnings

try:
    from scapy.all import IP, UDP, Ether, IPv6, Raw, raw, send, sendp
    from scapy.contrib.roce import BTH
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from check_icrc_scapy import ipv6_icrc  # the IPv6 ICRC the capture checks use
except ImportError as e:
    print(f"SKIP: python3-scapy is not installed ({e})")
    sys.exit(77)

X = 0x4d20


def v4_packet(src, dst, ip_id, dqpn, opcode, body):
    return (IP(src=src, dst=dst, id=ip_id, flags="DF", ttl=64)
            / UDP(sport=0xc0de, dport=4791, chksum=0)
            / BTH(opcode=opcode, dqpn=dqpn, psn=ip_id & 0xffffff, pkey=0xffff)
            / Raw(body))


def v6_packet(src, dst, psn, body):
    p = (IPv6(src=src, dst=dst, hlim=64)
         / UDP(sport=0xc0de, dport=4791, chksum=0)
         / BTH(opcode=0x04, dqpn=0x12, psn=psn, pkey=0xffff, icrc=0)
         / Raw(body))
    data = bytearray(raw(p))
    data[-4:] = ipv6_icrc(p)
    return IPv6(bytes(data))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "v4":
        src, dst = sys.argv[2:]
        deth = (0x80010000).to_bytes(4, "big") + b"\0" + (1).to_bytes(3, "big")
        frames = [v4_packet(src, dst, X, 1, 0x64, deth + bytes(256))]  # UD SEND Only to QP 1
        frames += [v4_packet(src, dst, X + i, 0x12, 0x04, b"rxe says hello!!") for i in range(1, 6)]
        corrupted = bytearray(raw(v4_packet(src, dst, X + 6, 0x12, 0x04, b"rxe says hello!!")))
        corrupted[-8] ^= 0x01  # a payload byte; the ICRC stays as it was made
        frames.append(IP(bytes(corrupted)))
        frames += [v4_packet(src, dst, X + 30000, 0x12, 0x04, b"after a jump..."),
                   v4_packet(src, dst, X + 30001, 0x12, 0x04, b"...and after it")]
        for f in frames:
            send(f, verbose=False)
    elif len(sys.argv) == 6 and sys.argv[1] == "v6":
        src, dst, iface, mac = sys.argv[2:]
        frames = [v6_packet(src, dst, 0x700 + i, b"rxe over IPv6!!!") for i in range(3)]
        for f in frames:
            if raw(f)[46:48] != b"\0\0":
                print("FAIL: scapy filled the UDP checksum")
                return 1
            sendp(Ether(dst=mac) / f, iface=iface, verbose=False)
    else:
        print(__doc__)
        return 2
    print(f"sent {len(frames)} packets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
