// Built in GOPATH mode (GO111MODULE=off) against Debian's /usr/share/gocode by
// tests/charts/run.sh; this file only lets GOPATH mode resolve the /v3 import of sprig.
module fitledger.test/charts/render

go 1.19
