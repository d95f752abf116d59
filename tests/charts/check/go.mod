// Built in GOPATH mode (GO111MODULE=off) against Debian's /usr/share/gocode by
// tests/charts/run.sh.
module fitledger.test/charts/check

go 1.19
