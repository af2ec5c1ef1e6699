#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# A fake `npu-smi` for tests/integration/npu.py: no Ascend NPU exists on the test machines. It
# prints what the real tool prints (`npu-smi info -m`, `npu-smi info`, the formats of driver
# 23.0 on an Atlas 800T A2) for the chips of a fake host that the test describes in files next
# to this script's directory (the test copies it to <driver>/tools/npu-smi):
#   ../fake/names     one line per chip: "<logic id> <chip name>", e.g. "2 Ascend 310P3"
#   ../fake/inodes    one line per chip: "<inode of its node under the device root> <logic id>"
#   ../fake/claimed   logic ids taken by "another process", one per line (may be absent)
# On the host (no /dev/davinciN) it lists every chip. In a sandbox it looks at the chips bound
# there (/dev/davinci0..), maps each back to its host chip by inode (bind mounts keep it), and
# fails as the real tool does when one of them is claimed.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
names=$here/fake/names
inodes=$here/fake/inodes
claimed=$here/fake/claimed

visible=""
for node in /dev/davinci[0-9]*; do
        [ -e "$node" ] || continue
        ino=$(stat -c %i "$node")
        id=$(awk -v ino="$ino" '$1 == ino { print $2 }' "$inodes")
        if [ -z "$id" ]; then
                echo "npu-smi: $node is not a chip of this host" >&2
                exit 3
        fi
        visible="$visible $id"
done
if [ -z "$visible" ]; then
        visible=$(awk '{ print $1 }' "$names")
fi

name_of() { awk -v id="$1" '$1 == id { $1 = ""; sub(/^ /, ""); print }' "$names"; }

case "${1:-} ${2:-}" in
"info -m")
        printf '        %-31s%-31s%-31s%s\n' "NPU ID" "Chip ID" "Chip Logic ID" "Chip Name"
        for id in $visible; do
                printf '        %-31s%-31s%-31s%s\n' "$id" 0 "$id" "$(name_of "$id")"
                printf '        %-31s%-31s%-31s%s\n' "$id" 1 "-" "Mcu"
        done
        ;;
"info ")
        if [ -f "$claimed" ]; then
                for id in $visible; do
                        # Only in a sandbox: on the host the tool still lists a chip in use.
                        if [ -e /dev/davinci0 ] && grep -qx "$id" "$claimed"; then
                                echo "dcmi model initialized failed, because the device is used. ret is -8020" >&2
                                exit 255
                        fi
                done
        fi
        sep='+===========================+===============+====================================================+'
        echo '+------------------------------------------------------------------------------------------------+'
        echo '| npu-smi 23.0.rc3                 Version: 23.0.rc3                                             |'
        echo '+---------------------------+---------------+----------------------------------------------------+'
        echo '| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|'
        echo '| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |'
        echo "$sep"
        for id in $visible; do
                short=$(name_of "$id" | sed 's/^Ascend //')
                printf '| %-5s %-19s | %-13s | %-51s|\n' "$id" "$short" OK "93.9        38                0    / 0"
                printf '| %-25s | %-13s | %-51s|\n' 0 "0000:C$id:00.0" "0           0    / 0          3379 / 65536"
                echo "$sep"
        done
        echo '+---------------------------+---------------+----------------------------------------------------+'
        echo '| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |'
        echo "$sep"
        for id in $visible; do
                printf '| %-94s |\n' "No running processes found in NPU $id"
                echo "$sep"
        done
        ;;
*)
        echo "npu-smi (fake): unsupported arguments: $*" >&2
        exit 2
        ;;
esac
