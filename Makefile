# Slate — entry points.  `make run` builds and starts slated in the
# foreground with the embedded default config (state in ./state); `make
# test` builds the ASan+UBSan and libFuzzer builds and runs every test
# (tests/run-all.sh; last line "N passed, N failed[, N skipped]");
# `make bench` compares slated with Debian's tgt on this machine.
# Missing Debian packages are installed with apt-get (as root or via sudo).

BUILD_PKGS := meson ninja-build pkg-config gcc clang liburing-dev libisal-dev libssl-dev \
	uuid-dev libjansson-dev libcmocka-dev
TEST_PKGS := libiscsi-bin libiscsi-dev sg3-utils open-iscsi tgt iperf3 libclang-rt-14-dev \
	python3 procps iproute2 fio xfsprogs sdparm nvme-cli
BENCH_PKGS := libiscsi-bin tgt iperf3 util-linux procps

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

.PHONY: all run build test deps-build deps-test bench clean

all: build

deps-build:
	$(call ensure_pkgs,$(BUILD_PKGS))

deps-test: deps-build
	$(call ensure_pkgs,$(TEST_PKGS))

build/build.ninja: | deps-build
	meson setup build -Dbuildtype=debugoptimized

build: deps-build build/build.ninja
	ninja -C build -j $(JOBS)

run: build
	mkdir -p state
	exec ./build/slated

# The test runner configures and builds build-asan/ and build-fuzz/ itself,
# counting each build as a test, so that its last line is always the count.
# When something failed, make would append "make: *** [test] Error 1" after
# that line; the contract is that the count is the last line and the status
# non-zero, so on failure the recipe ends make itself with SIGKILL (the one
# signal make does not report; exit status 137).  Nothing is left to clean up
# at that point: this is the last recipe of the goal.
test: deps-test
	@tests/run-all.sh || kill -KILL $$PPID

bench: deps-build
	$(call ensure_pkgs,$(BENCH_PKGS))
	bench/iscsi

clean:
	rm -rf build build-asan build-fuzz
