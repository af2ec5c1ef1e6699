# SPDX-License-Identifier: LGPL-2.1-or-later
#
# network: the baseline plus TCP and UDP over IPv4/IPv6, for sandboxes that reach the egress
# gateway through the bridge (DESIGN.md §5, §8). Raw and packet sockets stay refused.
# Format: see baseline.profile and docs/seccomp.md.

include baseline

allow-socket-families AF_INET AF_INET6   # added to the baseline's list (the lists are merged)

# Only stream and datagram sockets: SOCK_RAW (crafted packets), SOCK_PACKET (obsolete link layer),
# SOCK_SEQPACKET/SOCK_RDM (SCTP, RDS), SOCK_DCCP. EPERM is what a missing CAP_NET_RAW gives.
# The type argument carries SOCK_NONBLOCK/SOCK_CLOEXEC above bit 3, hence the mask.
deny socket if A0 == AF_INET unless A1 & SOCK_TYPE_MASK in SOCK_STREAM SOCK_DGRAM EPERM
deny socket if A0 == AF_INET6 unless A1 & SOCK_TYPE_MASK in SOCK_STREAM SOCK_DGRAM EPERM

# Only TCP and UDP (0 = the type's default): no SCTP, UDP-Lite, L2TP, MPTCP, ICMP sockets.
# Each of those is a module an unprivileged socket() call would autoload on the host.
deny socket if A0 == AF_INET unless A2 in IPPROTO_IP IPPROTO_TCP IPPROTO_UDP EPROTONOSUPPORT
deny socket if A0 == AF_INET6 unless A2 in IPPROTO_IP IPPROTO_TCP IPPROTO_UDP EPROTONOSUPPORT
