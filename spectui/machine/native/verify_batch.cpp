// spectui's verification-batch probe: times a decode of k tokens on a cached prefix two ways, with the
// logits of the last position only (as llama-server's prompt batches, tools/server/server-context.cpp:3867
// "extract the logits only for the last token") and with every position's logits sampled (as its
// verification batches, server-context.cpp:570-573 and :4268). Built by spectui against the same pinned
// libllama as its llama-server (machine/verify_probe.py).
//
// usage: verify_batch MODEL THREADS THREADS_BATCH N_GPU_LAYERS N_CTX REPEATS K1,K2,...  (prefix ids on stdin)
// prints one JSON object per line: {"k":K,"mode":"last"|"all","outputs":N,"ms":T}
#include "llama.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static void quiet(ggml_log_level, const char *, void *) {}

static double decode_ms(llama_context * ctx, llama_sampler * smpl, const std::vector<llama_token> & toks,
                        int pos0, bool all, int * n_out) {
    llama_batch batch = llama_batch_init((int) toks.size(), 0, 1);
    for (size_t i = 0; i < toks.size(); i++) {
        batch.token[i]     = toks[i];
        batch.pos[i]       = pos0 + (int) i;
        batch.n_seq_id[i]  = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i]    = all || i + 1 == toks.size();
    }
    batch.n_tokens = (int) toks.size();
    auto t0 = std::chrono::steady_clock::now();
    if (llama_decode(ctx, batch) != 0) {
        fprintf(stderr, "llama_decode failed at %d tokens\n", batch.n_tokens);
        exit(3);
    }
    int n = 0;  // each output row sampled, as the server samples every verified position
    for (int i = 0; i < batch.n_tokens; i++) {
        if (batch.logits[i]) {
            llama_sampler_sample(smpl, ctx, i);
            n++;
        }
    }
    auto t1 = std::chrono::steady_clock::now();
    llama_batch_free(batch);
    *n_out = n;
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

int main(int argc, char ** argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: %s MODEL THREADS THREADS_BATCH N_GPU_LAYERS N_CTX REPEATS K1,K2,... < prefix ids\n", argv[0]);
        return 2;
    }
    std::vector<llama_token> prefix;
    long id;
    while (scanf("%ld", &id) == 1) {
        prefix.push_back((llama_token) id);
    }
    std::vector<int> ks;
    for (char * p = strtok(argv[7], ","); p; p = strtok(nullptr, ",")) {
        ks.push_back(atoi(p));
    }
    int repeats = atoi(argv[6]);
    if (prefix.empty() || ks.empty() || repeats < 1) {
        fprintf(stderr, "need a prefix of token ids on stdin, k values and repeats >= 1\n");
        return 2;
    }
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = atoi(argv[4]);
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 3;
    }
    int k_max = 1;
    for (int k : ks) k_max = k > k_max ? k : k_max;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx           = (uint32_t) atoi(argv[5]);
    cp.n_batch         = cp.n_ubatch = (uint32_t) (prefix.size() > 512 ? prefix.size() : 512);
    cp.n_threads       = atoi(argv[2]);
    cp.n_threads_batch = atoi(argv[3]);
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx || (int) llama_n_ctx(ctx) < (int) prefix.size() + k_max) {
        fprintf(stderr, "cannot make a context of %d tokens\n", (int) prefix.size() + k_max);
        return 3;
    }
    llama_sampler * smpl = llama_sampler_init_greedy();
    const llama_vocab * vocab = llama_model_get_vocab(model);
    int n_vocab = llama_vocab_n_tokens(vocab);
    int n_out   = 0;
    decode_ms(ctx, smpl, prefix, 0, false, &n_out);  // the cached prefix
    const int pos = (int) prefix.size();
    for (int r = 0; r < repeats; r++) {
        for (size_t j = 0; j < ks.size(); j++) {
            int k = ks[r % 2 == 0 ? j : ks.size() - 1 - j];  // k rising, then falling
            std::vector<llama_token> toks;
            for (int i = 0; i < k; i++) toks.push_back(prefix[(r + i) % prefix.size()] % n_vocab);
            for (int all = 0; all < 2; all++) {
                double ms = decode_ms(ctx, smpl, toks, pos, all == 1, &n_out);
                llama_memory_seq_rm(llama_get_memory(ctx), 0, pos, -1);
                printf("{\"k\":%d,\"mode\":\"%s\",\"outputs\":%d,\"ms\":%.4f}\n", k, all ? "all" : "last", n_out, ms);
            }
        }
        fflush(stdout);
    }
    llama_sampler_free(smpl);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
