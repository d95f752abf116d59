// Package delayproxy is a reverse proxy in front of kube-apiserver that delays watch streams: each
// chunk of a watch response is passed on Lag after it arrived, in order. Every other request
// passes at once, except the replies to binding POSTs while HoldBindingReplies is set. It plays the lag of a busy cluster's watch (hundreds of milliseconds to
// seconds, the lab this project grew from) on loopback, where the watch is almost instant.
// Clients reach it over plain HTTP on loopback; it speaks TLS to the API server and passes the
// client's Authorization header through. client-go sends no bearer token to an http:// server,
// so a request without one gets token (the test's own credentials).
package delayproxy

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Proxy is a running proxy.
type Proxy struct {
	URL    string // http://127.0.0.1:<port>
	lagNS  atomic.Int64
	holdNS atomic.Int64
	held   atomic.Int64
	server *http.Server
}

// HoldBindingReplies makes the reply to each binding POST (pods/NAME/binding) that kube-apiserver
// answers from now on reach the client d after it arrived (0: at once): the API server has
// written the binding, and a client whose deadline is shorter sees a bind time out after it
// succeeded.
func (p *Proxy) HoldBindingReplies(d time.Duration) { p.holdNS.Store(int64(d)) }

// HeldBindingReplies is the number of binding replies held so far.
func (p *Proxy) HeldBindingReplies() int64 { return p.held.Load() }

// SetLag changes the delay of every watch chunk not passed on yet (each waits until it arrived
// plus the lag in force when its turn comes).
func (p *Proxy) SetLag(d time.Duration) { p.lagNS.Store(int64(d)) }

// Lag returns the current delay.
func (p *Proxy) Lag() time.Duration { return time.Duration(p.lagNS.Load()) }

// Start proxies to upstream (https://...), trusting caPEM.
func Start(upstream string, caPEM []byte, token string, lag time.Duration) (*Proxy, error) {
	target, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	p := &Proxy{}
	p.SetLag(lag)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool},
		MaxIdleConnsPerHost: 100, ForceAttemptHTTP2: false}
	direct := rp.Director
	rp.Director = func(r *http.Request) {
		direct(r)
		if r.Header.Get("Authorization") == "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
	}
	rp.FlushInterval = -1 // pass each chunk on as soon as it is written
	rp.ModifyResponse = func(resp *http.Response) error {
		if hold := time.Duration(p.holdNS.Load()); hold > 0 && resp.Request.Method == http.MethodPost &&
			strings.HasSuffix(resp.Request.URL.Path, "/binding") {
			p.held.Add(1)
			time.Sleep(hold)
		}
		q := resp.Request.URL.Query()
		if w := q.Get("watch"); w == "true" || w == "1" {
			resp.Body = p.delayed(resp.Body)
		}
		return nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.URL = "http://" + l.Addr().String()
	p.server = &http.Server{Handler: rp}
	go p.server.Serve(l)
	return p, nil
}

// Close stops the proxy and its streams.
func (p *Proxy) Close() { p.server.Close() }

type chunk struct {
	at   time.Time
	data []byte
	err  error
}

// delayed returns a body whose bytes come out Lag after they came in.
func (p *Proxy) delayed(body io.ReadCloser) io.ReadCloser {
	pr, pw := io.Pipe()
	chunks := make(chan chunk, 4096)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32*1024)
			n, err := body.Read(buf)
			if n > 0 {
				chunks <- chunk{at: time.Now(), data: buf[:n]}
			}
			if err != nil {
				chunks <- chunk{at: time.Now(), err: err}
				return
			}
		}
	}()
	go func() {
		defer body.Close()
		for c := range chunks {
			if wait := time.Until(c.at.Add(p.Lag())); wait > 0 {
				time.Sleep(wait)
			}
			if c.err != nil {
				pw.CloseWithError(c.err)
				return
			}
			if _, err := pw.Write(c.data); err != nil {
				body.Close()
				return
			}
		}
	}()
	return pr
}
