package main

// vLLM's workload metrics as its /metrics exposes them (prometheus_client's text format): the names, the
// model_name and engine labels, the 1-2-5 buckets of the token histograms written as floats ("1.0"), and a
// request_success_total series for each finished reason from the start.

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

const servedModel = "truth" // the id /v1/models lists

type histogram struct {
	edges  []float64 // finite upper bounds
	counts []float64 // per bucket, the last one +Inf
	sum    float64
	count  float64
}

func (h *histogram) observe(v float64) {
	i := 0
	for i < len(h.edges) && v > h.edges[i] {
		i++
	}
	h.counts[i]++
	h.sum += v
	h.count++
}

type vllmMetrics struct {
	mu          sync.Mutex
	blockTokens int
	prompt      histogram
	generation  histogram
	finished    map[string]float64
	queries     float64
	hits        float64
	seen        map[[32]byte]bool // the chained hashes of every whole block of every prompt so far
}

// buckets125 are vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... while not above max.
func buckets125(max int) []float64 {
	var edges []float64
	for scale := 1; ; scale *= 10 {
		for _, m := range []int{1, 2, 5} {
			if m*scale > max {
				return edges
			}
			edges = append(edges, float64(m*scale))
		}
	}
}

func newVllmMetrics(maxModelLen, blockTokens int) *vllmMetrics {
	edges := buckets125(maxModelLen)
	return &vllmMetrics{
		blockTokens: blockTokens,
		prompt:      histogram{edges: edges, counts: make([]float64, len(edges)+1)},
		generation:  histogram{edges: edges, counts: make([]float64, len(edges)+1)},
		finished:    map[string]float64{"stop": 0, "length": 0, "abort": 0},
		seen:        map[[32]byte]bool{},
	}
}

// arrive counts a prompt's tokens queried and hit in the prefix cache, and returns the hits: the leading
// whole blocks within all but its last word whose chain (the block and every block before it) an earlier
// prompt had. Every whole block of this prompt is then cached (nothing is evicted).
func (m *vllmMetrics) arrive(words []string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	chain := sha256.New()
	hits, hitting := 0, true
	for end := m.blockTokens; end <= len(words); end += m.blockTokens {
		chain.Write([]byte(strings.Join(words[end-m.blockTokens:end], " ") + "\x00"))
		var key [32]byte
		copy(key[:], chain.Sum(nil))
		if hitting && end <= len(words)-1 && m.seen[key] {
			hits = end
		} else {
			hitting = false
		}
		m.seen[key] = true
	}
	m.queries += float64(len(words))
	m.hits += float64(hits)
	return hits
}

// finish observes an answered request (vLLM's finished_reason "length": the server answers max_tokens).
func (m *vllmMetrics) finish(promptTokens, outputTokens int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prompt.observe(float64(promptTokens))
	m.generation.observe(float64(outputTokens))
	m.finished["length"]++
}

func (m *vllmMetrics) serve(w http.ResponseWriter, _ *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	labels := fmt.Sprintf(`engine="0",model_name=%q`, servedModel)
	var b strings.Builder
	for _, h := range []struct {
		name string
		hist *histogram
	}{{"vllm:request_prompt_tokens", &m.prompt}, {"vllm:request_generation_tokens", &m.generation}} {
		fmt.Fprintf(&b, "# HELP %s Number of tokens per request.\n# TYPE %s histogram\n", h.name, h.name)
		cumulative := 0.0
		for i, edge := range h.hist.edges {
			cumulative += h.hist.counts[i]
			fmt.Fprintf(&b, "%s_bucket{%s,le=\"%.1f\"} %.1f\n", h.name, labels, edge, cumulative)
		}
		fmt.Fprintf(&b, "%s_bucket{%s,le=\"+Inf\"} %.1f\n", h.name, labels, h.hist.count)
		fmt.Fprintf(&b, "%s_count{%s} %.1f\n%s_sum{%s} %.1f\n", h.name, labels, h.hist.count, h.name, labels, h.hist.sum)
	}
	b.WriteString("# HELP vllm:request_success_total Count of successfully processed requests.\n")
	b.WriteString("# TYPE vllm:request_success_total counter\n")
	for _, reason := range []string{"abort", "length", "stop"} {
		fmt.Fprintf(&b, "vllm:request_success_total{%s,finished_reason=%q} %.1f\n", labels, reason, m.finished[reason])
	}
	for _, c := range []struct {
		name  string
		value float64
	}{{"vllm:prefix_cache_queries_total", m.queries}, {"vllm:prefix_cache_hits_total", m.hits}} {
		fmt.Fprintf(&b, "# TYPE %s counter\n%s{%s} %.1f\n", c.name, c.name, labels, c.value)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}
