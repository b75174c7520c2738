#!/usr/bin/python3
"""Sends RoCE v2 packets over IPv4 as rxe does: each with an IPv4 ID from a
counter (the kernel's __ip_select_ident), not one of the 0..63 softverbs'
own packets carry, and an ICRC made for that ID by scapy's RoCE layer.

Usage: send_rxe_like.py SRC_IPV4 DST_IPV4 (root: a raw IP socket)

In order, from ID 0x4d20 (X): a UD SEND to QP 1 (a CM MAD's packet) with
ID X; RC SENDs to QP 0x12 with X+1 .. X+5; one with X+6 whose payload was
changed after its ICRC was made; then X+30000 (a jump) and X+30001.
"""
import sys

try:
    from scapy.all import IP, UDP, Raw, raw, send
    from scapy.contrib.roce import BTH
except ImportError as e:
    print(f"SKIP: python3-scapy is not installed ({e})")
    sys.exit(77)

X = 0x4d20


def packet(src, dst, ip_id, dqpn, opcode, body):
    return (IP(src=src, dst=dst, id=ip_id, flags="DF", ttl=64)
            / UDP(sport=0xc0de, dport=4791, chksum=0)
            / BTH(opcode=opcode, dqpn=dqpn, psn=ip_id & 0xffffff, pkey=0xffff)
            / Raw(body))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    src, dst = sys.argv[1:]
    deth = (0x80010000).to_bytes(4, "big") + b"\0" + (1).to_bytes(3, "big")
    frames = [packet(src, dst, X, 1, 0x64, deth + bytes(256))]  # UD SEND Only to QP 1
    frames += [packet(src, dst, X + i, 0x12, 0x04, b"rxe says hello!!") for i in range(1, 6)]
    corrupted = bytearray(raw(packet(src, dst, X + 6, 0x12, 0x04, b"rxe says hello!!")))
    corrupted[-8] ^= 0x01  # a payload byte; the ICRC stays as it was made
    frames.append(IP(bytes(corrupted)))
    frames += [packet(src, dst, X + 30000, 0x12, 0x04, b"after a jump..."),
               packet(src, dst, X + 30001, 0x12, 0x04, b"...and after it")]
    for f in frames:
        send(f, verbose=False)
    print(f"sent {len(frames)} packets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
