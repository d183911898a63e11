"""Data for the persistence backends: which systemd knows which .link key, which systemd each
distribution release ships, and how ethtool option groups are spelled.

Kept apart from the backends' logic (`backends`, `distro`) so a new key or release is one
line here, with its source.
"""

from __future__ import annotations

# .link [Link] key -> the first systemd version whose udev reads it. Source: systemd's NEWS
# ("CHANGES WITH N") where it names the key, else systemd.link(5) "Added in version N".
LINK_KEY_SINCE: dict[str, int] = {
    "MTUBytes": 209,  # systemd.link(5): added in 209 (.link files themselves came in 209)
    "TCPSegmentationOffload": 232,  # NEWS 232: TCPSegmentationOffload=, GenericSegmentation…
    "GenericSegmentationOffload": 232,  # NEWS 232
    "GenericReceiveOffload": 232,  # NEWS 232: GenericReceiveOffload=, LargeReceiveOffload=
    "LargeReceiveOffload": 232,  # NEWS 232
    "TCP6SegmentationOffload": 235,  # NEWS 235: "A new TCP6SegmentationOffload= setting"
    "RxChannels": 239,  # NEWS 239: RxChannels=, TxChannels=, OtherChannels=, CombinedChannels=
    "TxChannels": 239,
    "OtherChannels": 239,
    "CombinedChannels": 239,
    "RxBufferSize": 244,  # NEWS 244: "the new RxBufferSize= and TxBufferSize= settings"
    "TxBufferSize": 244,
    "ReceiveChecksumOffload": 245,  # systemd.link(5): added in 245 (not named in NEWS)
    "TransmitChecksumOffload": 245,
    "RxMiniBufferSize": 246,  # NEWS 246: RxMiniBufferSize= and RxJumboBufferSize=
    "RxJumboBufferSize": 246,
    "RxFlowControl": 246,  # NEWS 246: RxFlowControl=, TxFlowControl=, AutoNegotiationFlow…
    "TxFlowControl": 246,
    "AutoNegotiationFlowControl": 246,
    "TransmitQueueLength": 248,  # NEWS 248: "New [Link] TransmitQueueLength= setting"
    "ReceiveVLANCTAGHardwareAcceleration": 250,  # systemd.link(5): added in 250
    "TransmitVLANCTAGHardwareAcceleration": 250,
}

# (os-release ID or "el" for the Red Hat family, major release) -> the systemd it ships
# (None: no systemd). Used only when a snapshot did not record `systemctl --version`.
DISTRO_SYSTEMD: dict[tuple[str, str], int | None] = {
    ("el", "5"): None,
    ("el", "6"): None,  # upstart + udev 147
    ("el", "7"): 219,
    ("el", "8"): 239,
    ("el", "9"): 252,
    ("debian", "9"): 232,
    ("debian", "10"): 241,
    ("debian", "11"): 247,
    ("debian", "12"): 252,
    ("ubuntu", "18.04"): 237,
    ("ubuntu", "20.04"): 245,
    ("ubuntu", "22.04"): 249,
    ("ubuntu", "24.04"): 255,
}

# item group -> the ethtool option that sets it (as ETHTOOL_OPTS, post-up and udev RUN spell it)
ETHTOOL_FLAG = {"ring": "-G", "pause": "-A", "channels": "-L", "features": "-K"}
ETHTOOL_LONG = {"--set-ring": "-G", "--pause": "-A", "--set-channels": "-L", "--offload": "-K",
                "--features": "-K"}
