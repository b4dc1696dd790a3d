// groundtruth is an HTTP server whose latency is known: each response is delayed by a draw from a
// lognormal distribution, optionally plus a periodic stall during which every arriving request is held
// until the stall ends. It records its own service time of every request, which the benchmarks in bench/
// compare with what load generators report.
//
//	groundtruth -addr 127.0.0.1:18090 -median 105ms -sigma 0.35 [-stall-every 10s -stall-for 2s] [-fail-every N]
//	            [-down-at-request N -down-for 3s] [-tls-cert cert.pem -tls-key key.pem] [-require-header 'name: value']
//
// GET /_truth/records returns {"epoch": <unix s of the stall clock>, "records": [[completed_unix_ns,
// service_us], ...], "down": [from_unix_s, until_unix_s] once an outage began}; POST /_truth/reset clears the
// records. Every other path is the service.
//
// The same port also speaks gRPC (HTTP/2 without TLS, prior knowledge, as gRPC clients connect to a plaintext
// target): a request whose Content-Type is application/grpc gets one length-prefixed message back, a fixed
// ModelInferResponse of the Open Inference Protocol, and grpc-status in the trailers (14, UNAVAILABLE, for
// the failed ones), after the same delay, recorded the same way. Only the standard library: gRPC's wire format
// over HTTP/2 is simple enough to write by hand, and the server never decodes the request.
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"io"
	"log"
	"math"
	"math/rand"
	"net/http"
	"strings"
	"sync"
	"time"
)

type server struct {
	requireName  string // a header every request must carry (-require-header), else 401 or UNAUTHENTICATED
	requireValue string
	median       time.Duration
	sigma        float64
	stallEvery   time.Duration
	stallFor     time.Duration
	// -stall-at-request: one stall instead, from the arrival of that request on (a stall placed on a load
	// generator's schedule: at 100 requests per second, the 151st arrives 1.5 s into it).
	stallAtRequest int64
	failEvery      int64
	// -down-at-request: an outage from the arrival of that request on, for -down-for: every request arriving
	// in it is answered 503 (gRPC UNAVAILABLE) at once, as a load balancer with no backend answers.
	downAtRequest int64
	downFor       time.Duration
	epoch         time.Time
	// -slots: requests served at once (nil: no limit); the others wait for a slot, and their delay starts
	// when they get one, so a known capacity: latency doubles once the load exceeds the slots.
	slots chan struct{}

	mu         sync.Mutex
	rng        *rand.Rand
	served     int64
	arrivals   int64
	stallStart time.Time
	downStart  time.Time
	records    [][2]int64
}

// stallRemaining is how long a request arriving at t waits for the current stall to end (0 outside stalls).
// Stalls occupy [k*every, k*every+for) after the epoch.
func (s *server) stallRemaining(t time.Time) time.Duration {
	if s.stallAtRequest > 0 {
		s.mu.Lock()
		from := s.stallStart
		s.mu.Unlock()
		if !from.IsZero() && !t.Before(from) && t.Sub(from) < s.stallFor {
			return s.stallFor - t.Sub(from)
		}
		return 0
	}
	if s.stallEvery <= 0 {
		return 0
	}
	phase := t.Sub(s.epoch) % s.stallEvery
	if phase < s.stallFor {
		return s.stallFor - phase
	}
	return 0
}

func (s *server) draw() time.Duration {
	s.mu.Lock()
	z := s.rng.NormFloat64()
	s.mu.Unlock()
	return time.Duration(float64(s.median) * math.Exp(s.sigma*z))
}

// inferResponse is a ModelInferResponse{model_name: "truth"} in protobuf's encoding (field 1, length 5),
// framed as gRPC frames a message: a zero compression flag and a 4-byte big-endian length first.
var inferResponse = grpcFrame([]byte{0x0a, 0x05, 't', 'r', 'u', 't', 'h'})

func grpcFrame(message []byte) []byte {
	frame := make([]byte, 5, 5+len(message))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(message)))
	return append(frame, message...)
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	s.mu.Lock()
	s.arrivals++
	if s.arrivals == s.stallAtRequest {
		s.stallStart = arrived
	}
	if s.arrivals == s.downAtRequest {
		s.downStart = arrived
	}
	down := !s.downStart.IsZero() && arrived.Sub(s.downStart) < s.downFor
	s.mu.Unlock()
	_, _ = io.Copy(io.Discard, r.Body)
	start := arrived
	if s.slots != nil {
		s.slots <- struct{}{}
		start = time.Now()
	}
	delay := s.stallRemaining(start) + s.draw()
	if down {
		delay = 0
	}
	time.Sleep(time.Until(start.Add(delay)))
	if s.slots != nil {
		<-s.slots
	}
	s.mu.Lock()
	s.served++
	fail := down || (s.failEvery > 0 && s.served%s.failEvery == 0)
	s.mu.Unlock()
	denied := s.requireName != "" && r.Header.Get(s.requireName) != s.requireValue
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
		if denied {
			w.Header().Set("Grpc-Status", "16")
			w.Header().Set("Grpc-Message", "groundtruth: missing or wrong "+s.requireName)
		} else if down {
			w.Header().Set("Grpc-Status", "14")
			w.Header().Set("Grpc-Message", "groundtruth: down as asked (-down-at-request)")
		} else if fail {
			w.Header().Set("Grpc-Status", "14")
			w.Header().Set("Grpc-Message", "groundtruth: failed as asked (-fail-every)")
		} else {
			_, _ = w.Write(inferResponse)
			w.Header().Set("Grpc-Status", "0")
		}
	} else {
		w.Header().Set("Content-Type", "application/json")
		if denied {
			w.WriteHeader(http.StatusUnauthorized)
		} else if fail {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write([]byte(`{"outputs":[{"name":"y","shape":[1],"datatype":"FP32","data":[1.0]}]}`))
	}
	done := time.Now()
	s.mu.Lock()
	s.records = append(s.records, [2]int64{done.UnixNano(), done.Sub(arrived).Microseconds()})
	s.mu.Unlock()
}

func (s *server) truth(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Method == http.MethodPost {
		s.records = s.records[:0]
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	answer := map[string]any{"epoch": float64(s.epoch.UnixNano()) / 1e9, "records": s.records}
	if !s.downStart.IsZero() {
		from := float64(s.downStart.UnixNano()) / 1e9
		answer["down"] = []float64{from, from + s.downFor.Seconds()}
	}
	_ = json.NewEncoder(w).Encode(answer)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:18090", "listen address (loopback only)")
	median := flag.Duration("median", 105*time.Millisecond, "median of the lognormal delay")
	sigma := flag.Float64("sigma", 0.35, "sigma of the lognormal delay (of the log)")
	stallEvery := flag.Duration("stall-every", 0, "period of the stalls (0: none)")
	stallFor := flag.Duration("stall-for", 2*time.Second, "length of each stall")
	stallAtRequest := flag.Int64("stall-at-request", 0, "one stall, from this request's arrival on (0: -stall-every's)")
	seed := flag.Int64("seed", 1, "random seed")
	failEvery := flag.Int64("fail-every", 0, "answer every Nth request with 503 (0: never)")
	downAtRequest := flag.Int64("down-at-request", 0, "an outage from this request's arrival on (0: none)")
	downFor := flag.Duration("down-for", 3*time.Second, "length of the outage")
	tlsCert := flag.String("tls-cert", "", "serve TLS (HTTP/2 by ALPN) with this certificate (PEM)")
	tlsKey := flag.String("tls-key", "", "the certificate's private key (PEM)")
	slots := flag.Int("slots", 0, "requests served at once, the others queued (0: no limit)")
	require := flag.String("require-header", "", "'name: value' every request must carry, else 401 (gRPC: UNAUTHENTICATED)")
	flag.Parse()

	s := &server{
		median: *median, sigma: *sigma, stallEvery: *stallEvery, stallFor: *stallFor, stallAtRequest: *stallAtRequest, failEvery: *failEvery,
		downAtRequest: *downAtRequest, downFor: *downFor, epoch: time.Now(), rng: rand.New(rand.NewSource(*seed)),
	}
	if *slots > 0 {
		s.slots = make(chan struct{}, *slots)
	}
	if *require != "" {
		name, value, _ := strings.Cut(*require, ":")
		s.requireName, s.requireValue = strings.TrimSpace(name), strings.TrimSpace(value)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/_truth/records", s.truth)
	mux.HandleFunc("/_truth/reset", s.truth)
	mux.HandleFunc("/", s.serve)
	log.Printf("groundtruth on %s: lognormal(median %v, sigma %.2f), stall %v every %v", *addr, *median, *sigma, *stallFor, *stallEvery)
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true) // gRPC's plaintext connections
	srv := &http.Server{Addr: *addr, Handler: mux, Protocols: protocols}
	if *tlsCert != "" {
		protocols.SetHTTP2(true)
		log.Fatal(srv.ListenAndServeTLS(*tlsCert, *tlsKey))
	}
	log.Fatal(srv.ListenAndServe())
}
