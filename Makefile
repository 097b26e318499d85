# Slate — entry points.  `make run` builds and starts slated in the
# foreground with the embedded default config (state in ./state); `make
# test` builds the ASan+UBSan and libFuzzer builds and runs every test
# (tests/run-all.sh, see the comment at `test`); `make deps-test` only
# installs what the tests need (.ci/run uses it before the runner);
# `make bench` compares slated (event and polling mode, null backend) with
# Debian's tgt and the loopback floors (sockperf, iperf3) on this machine.
# `make install [PREFIX=/usr/local] [DESTDIR=...]` builds and installs the
# binaries, man pages, systemd unit, default config and docs under PREFIX;
# `make deb` builds the Debian package (build-deb/slate_*.deb) from a copy of
# the tree and checks it with lintian.
# Missing Debian packages are installed with apt-get (as root or via sudo).

BUILD_PKGS := meson ninja-build pkg-config gcc clang liburing-dev libisal-dev libssl-dev \
	uuid-dev libjansson-dev libcmocka-dev libxxhash-dev libmicrohttpd-dev libsystemd-dev
TEST_PKGS := libiscsi-bin libiscsi-dev sg3-utils open-iscsi tgt iperf3 libclang-rt-14-dev \
	python3 procps iproute2 fio xfsprogs sdparm nvme-cli prometheus chromium man-db groff-base systemd \
	ddpt openssl ceph-mon ceph-osd ceph-common librbd-dev librados-dev uuid-runtime
# sockperf: the QD1 floor (TCP ping-pong) of bench/nvmf and bench/iscsi; jq reads slate-perf's JSON
BENCH_PKGS := libiscsi-bin tgt iperf3 util-linux procps sockperf jq
# debian/control's Build-Depends plus the packaging tools; dpkg-buildpackage
# checks Build-Depends itself, so a package missing here fails loudly there.
DEB_PKGS := $(BUILD_PKGS) libiscsi-dev python3 build-essential debhelper dpkg-dev fakeroot lintian

PREFIX ?= /usr/local
DESTDIR ?=

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
JOBS := $(shell nproc 2>/dev/null || echo 2)

# Install the packages of $(1) that dpkg does not report as installed;
# `apt-get update` runs once, and only when something is missing.
define ensure_pkgs
	@missing=""; \
	for p in $(1); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing missing packages:$$missing"; \
		$(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $$missing \
			|| { echo "apt-get install failed"; exit 1; }; \
	fi
endef

.PHONY: all run build install deb test deps-build deps-test deps-deb bench clean

all: build

deps-build:
	$(call ensure_pkgs,$(BUILD_PKGS))

deps-test: deps-build
	$(call ensure_pkgs,$(TEST_PKGS))

build/build.ninja: | deps-build
	meson setup build -Dbuildtype=debugoptimized

build: deps-build build/build.ninja
	ninja -C build -j $(JOBS)

# Install into PREFIX (staged under DESTDIR when set) from the same build/
# as `make run`: the prefix is a meson option of that build.
install: deps-build build/build.ninja
	meson configure build -Dprefix=$(PREFIX)
	ninja -C build -j $(JOBS)
	meson install -C build --no-rebuild $(if $(DESTDIR),--destdir "$(abspath $(DESTDIR))")

deps-deb:
	$(call ensure_pkgs,$(DEB_PKGS))

# The package is built from a copy of the tracked and untracked-but-not-
# ignored files in build-deb/slate (dpkg-buildpackage writes its results to
# the parent directory, which must not be the folder holding the checkout).
deb: deps-deb
	rm -rf build-deb && mkdir -p build-deb/slate
	git ls-files -z -co --exclude-standard | \
		tar --null --ignore-failed-read -T - -cf - | tar -xf - -C build-deb/slate
	cd build-deb/slate && dpkg-buildpackage -us -uc -b
	lintian --fail-on error,warning build-deb/slate_*.changes
	@ls -l build-deb/*.deb

run: build
	mkdir -p state
	exec ./build/slated

# The test runner configures and builds build-asan/ and build-fuzz/ itself,
# counting each build as a test, so that its last line is always the count
# ("N passed, N failed[, N skipped]") and its exit status non-zero when
# anything failed: tests/run-all.sh is the contract, and .ci/run calls it
# directly after `make deps-test`.  Through make, a failed run is followed
# by make's own "make: *** [Makefile:NN: test] Error 1" line: GNU make
# reports every failing recipe, and the only ways to keep it quiet are to
# hide the failure (exit 0) or to kill make with a signal it does not report
# (this recipe once did `kill -KILL $$PPID`), both worse than one extra line
# for a human reader.  To see the count last, run tests/run-all.sh itself
# (after `make deps-test`), as CI does.
test: deps-test
	@tests/run-all.sh

bench: deps-build
	$(call ensure_pkgs,$(BENCH_PKGS))
	bench/iscsi
	bench/nvmf

clean:
	rm -rf build build-asan build-fuzz build-deb
