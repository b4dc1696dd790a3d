// streamtruth is an OpenAI-compatible streaming server whose timing is known: the first token of every
// answer follows a lognormal draw, and every later token a lognormal gap, optionally after a periodic
// stall during which arriving requests are held until the stall ends. It records when each request
// arrived and when it sent every content chunk (one token each), which the LLM benchmarks in bench/
// compare with what load generators report.
//
//	streamtruth -addr 127.0.0.1:18091 -ttft 40ms -ttft-sigma 0.3 -gap 8ms -gap-sigma 0.5 \
//	            [-stall-every 10s -stall-for 2s] [-word " the"] [-no-records] [-fault-every 4 -fault empty]
//	            [-reasoning 6 -reasoning-field reasoning]
//
// Every token is the text of -word: pick one the client's tokenizer encodes as one token, so that clients
// which count tokens themselves count one per chunk, as the server does.
// POST /v1/chat/completions and /v1/completions answer max_tokens tokens (16 when absent), streamed as
// Server-Sent Events when "stream" is true (a role-only chunk first for chat, one chunk per token, a
// finish_reason chunk, a usage chunk when stream_options.include_usage, then [DONE]), or as one JSON body.
// With -reasoning N, a chat answer thinks first, as a reasoning model served with a reasoning parser does:
// its first N tokens (of the max_tokens) stream in delta.<-reasoning-field> ("reasoning" as vLLM sends it,
// or "reasoning_content"), the rest in delta.content, and usage counts them in
// completion_tokens_details.reasoning_tokens; each record says how many of its chunks were thinking.
// GET /v1/models lists the model. GET /_truth/records returns {"epoch": <unix s of the stall clock>,
// "records": [{"arrived": unix_ns, "chunks": [unix_ns, ...]}, ...]}; POST /_truth/reset clears them.
// A delay of 0 sends without sleeping (the capacity benchmark's zero-delay server).
// With -fault-every N, every Nth streamed answer (counted over the server's life) misbehaves on purpose as
// -fault says, the way real servers do: "error-object" (a 200 stream whose only event after the role is an
// engine's error object, as vLLM sends when its engine dies, then [DONE]), "empty" (the role, a finish
// reason, [DONE]: no token), or "cut" (two tokens, then the connection closed mid-stream). Such answers are
// not recorded as served.
// With -vllm-metrics, GET /metrics exports what vLLM exports about the workload it served, under vLLM's names
// and labels (model_name, engine): vllm:request_prompt_tokens and vllm:request_generation_tokens histograms
// with vLLM's 1-2-5 buckets up to -max-model-len, vllm:request_success_total by finished_reason (a series for
// each reason from the start, as vLLM creates them), observed when an answer ends, and the prefix cache's
// vllm:prefix_cache_queries_total and vllm:prefix_cache_hits_total in prompt tokens, counted when a request
// arrives: its leading whole blocks of -block-tokens words that an earlier prompt began with are hits (never
// its last token, which the engine always computes). Each record then also says its prompt words and hits.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const spinMargin = 2 * time.Millisecond

type record struct {
	Arrived   int64   `json:"arrived"`
	Chunks    []int64 `json:"chunks"`
	Reasoning int     `json:"reasoning"` // the first Reasoning chunks carried thinking
	Prompt    int     `json:"prompt"`    // prompt words (the stand-in for tokens)
	Cached    int     `json:"cached"`    // of them, prefix-cache hits (with -vllm-metrics)
}

type server struct {
	ttft, gap            time.Duration
	ttftSigma, gapSigma  float64
	stallEvery, stallFor time.Duration
	keepRecords          bool
	word                 string
	epoch                time.Time
	faultEvery           int64
	fault                string
	reasoning            int
	reasoningField       string
	answered             atomic.Int64

	mu      sync.Mutex
	rng     *rand.Rand
	records []record
	vllm    *vllmMetrics // nil without -vllm-metrics
}

type request struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	MaxTokens     int    `json:"max_tokens"`
	MaxCompletion int    `json:"max_completion_tokens"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Prompt   any `json:"prompt"`
	Messages []struct {
		Content any `json:"content"`
	} `json:"messages"`
}

// stallRemaining is how long a request arriving at t waits for the current stall to end (0 outside
// stalls). Stalls occupy [k*every, k*every+for) after the epoch.
func (s *server) stallRemaining(t time.Time) time.Duration {
	if s.stallEvery <= 0 {
		return 0
	}
	phase := t.Sub(s.epoch) % s.stallEvery
	if phase < s.stallFor {
		return s.stallFor - phase
	}
	return 0
}

func (s *server) draw(median time.Duration, sigma float64) time.Duration {
	if median <= 0 {
		return 0
	}
	s.mu.Lock()
	z := s.rng.NormFloat64()
	s.mu.Unlock()
	return time.Duration(float64(median) * math.Exp(sigma*z))
}

// promptWords stands in for a tokenizer: usage.prompt_tokens counts whitespace-separated words.
func (r *request) promptWords() int {
	return len(r.words())
}

func (r *request) words() []string {
	var words []string
	add := func(v any) {
		if text, ok := v.(string); ok {
			words = append(words, strings.Fields(text)...)
		}
	}
	add(r.Prompt)
	for _, m := range r.Messages {
		add(m.Content)
	}
	return words
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"body is not JSON"}}`, http.StatusBadRequest)
		return
	}
	tokens := req.MaxTokens
	if req.MaxCompletion > 0 {
		tokens = req.MaxCompletion
	}
	if tokens <= 0 {
		tokens = 16
	}
	chat := strings.HasSuffix(r.URL.Path, "/chat/completions")
	rec := record{Arrived: arrived.UnixNano(), Chunks: make([]int64, 0, tokens), Prompt: req.promptWords()}
	if s.vllm != nil {
		rec.Cached = s.vllm.arrive(req.words())
	}
	sleepUntil := func(t time.Time) {
		if d := time.Until(t); d > 0 {
			time.Sleep(d)
		}
	}
	// Go's timers wake up to a millisecond late (the poller waits in whole milliseconds), which would move
	// every first token off the analytic distribution the coordinated-omission benchmark compares with: the
	// last spinMargin before the first token is spun instead. Later tokens sleep (their truth is recorded).
	onTime := func(t time.Time) {
		sleepUntil(t.Add(-spinMargin))
		for time.Now().Before(t) {
			runtime.Gosched()
		}
	}
	next := arrived.Add(s.stallRemaining(arrived) + s.draw(s.ttft, s.ttftSigma))
	thinking := 0
	if chat {
		thinking = min(s.reasoning, tokens)
	}
	rec.Reasoning = thinking
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d`,
		req.promptWords(), tokens, req.promptWords()+tokens)
	if thinking > 0 {
		usage += fmt.Sprintf(`,"completion_tokens_details":{"reasoning_tokens":%d}`, thinking)
	}
	usage += "}"
	id := fmt.Sprintf("truth-%d", arrived.UnixNano())

	if !req.Stream {
		for i := 0; i < tokens; i++ {
			if i == 0 {
				onTime(next)
			} else {
				sleepUntil(next)
			}
			next = time.Now().Add(s.draw(s.gap, s.gapSigma))
		}
		text := strings.Repeat(s.word, tokens)
		w.Header().Set("Content-Type", "application/json")
		if chat {
			fmt.Fprintf(w, `{"id":%q,"object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"length"}],"usage":%s}`, id, req.Model, text, usage)
		} else {
			fmt.Fprintf(w, `{"id":%q,"object":"text_completion","model":%q,"choices":[{"index":0,"text":%q,"finish_reason":"length"}],"usage":%s}`, id, req.Model, text, usage)
		}
		s.keep(rec, tokens)
		return
	}

	flusher := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	send := func(data string) {
		fmt.Fprintf(w, "data: %s\n\n", data)
		flusher.Flush()
	}
	object := "text_completion"
	if chat {
		object = "chat.completion.chunk"
		send(fmt.Sprintf(`{"id":%q,"object":%q,"model":%q,"choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}`, id, object, req.Model))
	}
	fault := ""
	if n := s.answered.Add(1); s.faultEvery > 0 && n%s.faultEvery == 0 {
		fault = s.fault
	}
	switch fault {
	case "error-object":
		onTime(next)
		send(`{"error":{"message":"EngineCore encountered an issue","type":"InternalServerError","code":500}}`)
		send("[DONE]")
		return
	case "empty":
		onTime(next)
		send(fmt.Sprintf(`{"id":%q,"object":%q,"model":%q,"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, id, object, req.Model))
		send("[DONE]")
		return
	case "cut":
		if tokens > 2 {
			tokens = 2
		}
	}
	for i := 0; i < tokens; i++ {
		if i == 0 {
			onTime(next)
		} else {
			sleepUntil(next)
		}
		if chat {
			field := "content"
			if i < thinking {
				field = s.reasoningField
			}
			send(fmt.Sprintf(`{"id":%q,"object":%q,"model":%q,"choices":[{"index":0,"delta":{%q:%q},"finish_reason":null}]}`, id, object, req.Model, field, s.word))
		} else {
			send(fmt.Sprintf(`{"id":%q,"object":%q,"model":%q,"choices":[{"index":0,"text":%q,"finish_reason":null}]}`, id, object, req.Model, s.word))
		}
		sent := time.Now()
		rec.Chunks = append(rec.Chunks, sent.UnixNano())
		next = sent.Add(s.draw(s.gap, s.gapSigma))
	}
	if fault == "cut" {
		panic(http.ErrAbortHandler) // net/http closes the connection without ending the chunked body
	}
	if chat {
		send(fmt.Sprintf(`{"id":%q,"object":%q,"model":%q,"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`, id, object, req.Model))
	} else {
		send(fmt.Sprintf(`{"id":%q,"object":%q,"model":%q,"choices":[{"index":0,"text":"","finish_reason":"length"}]}`, id, object, req.Model))
	}
	if req.StreamOptions.IncludeUsage {
		send(fmt.Sprintf(`{"id":%q,"object":%q,"model":%q,"choices":[],"usage":%s}`, id, object, req.Model, usage))
	}
	send("[DONE]")
	s.keep(rec, tokens)
}

// keep records a served answer of `tokens` tokens.
func (s *server) keep(rec record, tokens int) {
	if s.vllm != nil {
		s.vllm.finish(rec.Prompt, tokens)
	}
	if !s.keepRecords {
		return
	}
	s.mu.Lock()
	s.records = append(s.records, rec)
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
	_ = json.NewEncoder(w).Encode(map[string]any{"epoch": float64(s.epoch.UnixNano()) / 1e9, "records": s.records})
}

func (s *server) models(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"truth","object":"model","owned_by":"kaliper"}]}`))
}

func main() {
	addr := flag.String("addr", "127.0.0.1:18091", "listen address (loopback only)")
	ttft := flag.Duration("ttft", 40*time.Millisecond, "median of the lognormal time to the first token")
	ttftSigma := flag.Float64("ttft-sigma", 0.3, "sigma (of the log) of the time to the first token")
	gap := flag.Duration("gap", 8*time.Millisecond, "median of the lognormal gap between tokens")
	gapSigma := flag.Float64("gap-sigma", 0.5, "sigma (of the log) of the gap between tokens")
	stallEvery := flag.Duration("stall-every", 0, "period of the stalls (0: none)")
	stallFor := flag.Duration("stall-for", 2*time.Second, "length of each stall")
	word := flag.String("word", " tok", "the text of every token")
	noRecords := flag.Bool("no-records", false, "keep no records (long capacity runs)")
	seed := flag.Int64("seed", 1, "random seed")
	faultEvery := flag.Int64("fault-every", 0, "every Nth streamed answer misbehaves as -fault says (0: none)")
	fault := flag.String("fault", "error-object", "error-object, empty or cut")
	reasoning := flag.Int("reasoning", 0, "chat answers think first: their first N tokens are reasoning")
	reasoningField := flag.String("reasoning-field", "reasoning", "the delta field of the thinking: reasoning or reasoning_content")
	vllmMetricsOn := flag.Bool("vllm-metrics", false, "export vLLM's workload metrics on GET /metrics")
	maxModelLen := flag.Int("max-model-len", 8192, "the context length vLLM's token histograms' buckets end at")
	blockTokens := flag.Int("block-tokens", 16, "the prefix cache's block, in prompt words")
	flag.Parse()
	if *reasoningField != "reasoning" && *reasoningField != "reasoning_content" {
		log.Fatalf("-reasoning-field %q: use reasoning or reasoning_content", *reasoningField)
	}
	if *fault != "error-object" && *fault != "empty" && *fault != "cut" {
		log.Fatalf("-fault %q: use error-object, empty or cut", *fault)
	}

	s := &server{
		ttft: *ttft, ttftSigma: *ttftSigma, gap: *gap, gapSigma: *gapSigma,
		stallEvery: *stallEvery, stallFor: *stallFor, keepRecords: !*noRecords, word: *word,
		epoch: time.Now(), rng: rand.New(rand.NewSource(*seed)), faultEvery: *faultEvery, fault: *fault,
		reasoning: *reasoning, reasoningField: *reasoningField,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/_truth/records", s.truth)
	mux.HandleFunc("/_truth/reset", s.truth)
	mux.HandleFunc("/v1/models", s.models)
	mux.HandleFunc("/v1/chat/completions", s.serve)
	mux.HandleFunc("/v1/completions", s.serve)
	if *vllmMetricsOn {
		s.vllm = newVllmMetrics(*maxModelLen, *blockTokens)
		mux.HandleFunc("/metrics", s.vllm.serve)
	}
	log.Printf("streamtruth on %s: ttft lognormal(%v, %.2f), gap lognormal(%v, %.2f), stall %v every %v",
		*addr, *ttft, *ttftSigma, *gap, *gapSigma, *stallFor, *stallEvery)
	log.Fatal((&http.Server{Addr: *addr, Handler: mux}).ListenAndServe())
}
