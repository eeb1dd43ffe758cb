#!/usr/bin/env bash
# The base of the harness's Kafka image, from Debian's packages only (no registry pull): a minimal
# Debian root file system made by debootstrap with Debian's Java 17 runtime, imported as an image.
#
#   build-base.sh TAG
#
# Run by static_consumer_lab.brokers.kafka_image (as root: debootstrap needs it); the Kafka layer goes on top
# (Dockerfile). Everything that decides what is in the image is in this file, so its hash is part of the
# image tags: edit it and the next build makes a new base. STATIC_CONSUMER_DEBIAN_MIRROR picks another
# Debian mirror (the packages are the same).
set -euo pipefail

tag="${1:?usage: build-base.sh TAG}"
suite=bookworm                                   # Debian 12, the machines' own release
packages=openjdk-17-jre-headless                 # Kafka 4 brokers need Java 17 or newer
mirror="${STATIC_CONSUMER_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
kafka_uid=1000                                   # the broker runs as this user, not as root

if [ "$(id -u)" != 0 ]; then
    echo "build-base.sh: debootstrap needs root (run the image build as root)" >&2
    exit 1
fi
command -v debootstrap >/dev/null || { echo "build-base.sh: install Debian's debootstrap package" >&2; exit 1; }

work="$(mktemp -d -t static-consumer-rootfs.XXXXXX)"
trap 'rm -rf "$work"' EXIT
root="$work/root"

debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror"

# What a broker image does not need: package caches and lists, documentation, translations.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/* \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/* "$root"/var/log/*.log
# Written by the broker's user: the generated configuration and the KRaft log directory.
mkdir -p "$root"/opt/kafka/libs "$root"/opt/kafka/bin "$root"/opt/kafka/config "$root"/var/lib/kafka/data
chown -R "$kafka_uid:$kafka_uid" "$root"/opt/kafka/config "$root"/var/lib/kafka

java_home="/usr/lib/jvm/java-17-openjdk-$(dpkg --print-architecture)"
tar --numeric-owner -C "$root" -c . | docker import \
    --change "ENV JAVA_HOME=$java_home" \
    --change "ENV PATH=$java_home/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --change "ENV LANG=C.UTF-8" \
    --change "LABEL org.opencontainers.image.description=\"Debian $suite minbase with $packages\"" \
    - "$tag"
