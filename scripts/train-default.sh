#!/usr/bin/env bash
# Trains the default model that ships in models/default.safetensors (issue 11):
# the built-in task `memory` (fresh random symbols every episode, facts of 1-4
# symbols told, re-told and overridden, never-told facts asked) with truncated
# gradients, as a curriculum of stages, each resuming the last. Straight on the
# full task the model sat on the "answer no to everything" plateau for
# thousands of iterations; with few, short facts first it learns to bind, then
# longer facts, then to hold them over longer rollouts; the last stage holds
# the state on steps that tell nothing (empty_steps "hold"), so what it holds
# after one step it holds after 10,000 silent ones. How much it holds (K facts)
# is what more training would raise: bench/bench_memory prints where it stands.
#
#   bash scripts/train-default.sh [OUT_DIR]     (default: build/train-default)
#
# Time: about 65 minutes on 2 CPU cores for stages 0-D, then 74 for stages E
# and F (the stage budgets below; they ran on a machine shared with other jobs,
# E at about 200 trajectory steps/s), then 75 for stage G (1 thread, about
# 1,200 trajectory steps/s), 45 for stage H, 70 for stage I, 90 for stage J, 105 for
# stage K, 70 for stage L, 90 for stage M, 90 for stage N and 88 for stage O, then the
# benchmark (a few minutes). Those times are of worldstate-train before it
# trained in chunks on its threads (model/trainer.h ws_train_config.threads):
# it now runs these stages' steps about twice as fast on 2 threads, 1.3 times
# on 1, so a stage given in seconds runs more iterations than it did.
# Stage F was stopped by hand at 1440 s of a 2400 s budget, and the shipped file
# is the parameters of its last checkpoint (iteration 16000). Tried and not kept: ages drawn from a pool growing
# to 500 steps with up to 16 facts (after B2) and 48-step rollouts (after D)
# both lowered the accuracy on told facts within 35 and 15 minutes. So did chatter
# (--chatter-rate: steps that also tell unasked facts of fresh symbols, what
# bench_memory --chatter 1 measures): from the shipped file, 8000 iterations of
# pool lifetimes to 64 steps at chatter rate up to 1, or 2000 of 16-step
# rollouts of up to 8 facts at rate up to 0.5, moved K=4 told-true after 10
# chatter steps from 27% to 45-62% while K=16 at delay 1 fell from 81% to 77%:
# at d=64 what the state keeps under new facts trades against how much it holds.
# From stage H's larger worlds it did not (stage I, below). Copy OUT_DIR/default.safetensors to
# models/default.safetensors and rebuild: worldstated embeds it. This is the
# sequence the shipped file was trained with; where a stage was cut short by
# hand, its budget here is the iterations it ran (so its learning-rate schedule
# decays further than it did). Quality reproduces, bits do not (OpenMP
# reductions, time budgets).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/train-default}
TRAIN=build/server/worldstate-train
[[ -x $TRAIN ]] || bash scripts/build.sh
mkdir -p "$OUT"
THREADS=${THREADS:-2}
run() { $TRAIN train --task memory --batch 64 --iters 0 --threads "$THREADS" --no-eval \
          --log "$OUT/train.log" "$@"; }

echo "stage 0: the full task from scratch, 2000 iterations"
run --empty-steps update --d 64 --heads 4 --state-tokens 32 --upd-layers 2 --ext-layers 2 --fact-len 4 \
  --vocab 4096 --overflow 256 --symbol-code hashed --seed 12 --lr 1e-3 --warmup 300 \
  --min-lr-ratio 1 --iters 2000 --live-facts 32 --max-arity 4 --lifetime pool --rollout 8 \
  --max-age 48 --checkpoint "$OUT/stage-0.ckpt"

echo "stage A: at most 4 facts of 1-2 symbols, 8-step rollouts (900 s)"
run --resume "$OUT/stage-0.ckpt" --seed 21 --lr 1e-3 --seconds 900 \
  --live-facts 4 --max-arity 2 --lifetime fixed --rollout 8 --checkpoint "$OUT/stage-a.ckpt"

echo "stage B: up to 16 facts of 1-4 symbols, states up to ~150 steps old (9400 iterations)"
run --resume "$OUT/stage-a.ckpt" --seed 13 --lr 1e-3 --iters 9400 \
  --live-facts 16 --max-arity 4 --lifetime pool --rollout 8 --max-age 148 \
  --checkpoint "$OUT/stage-b.ckpt"

echo "stage B2: up to 8 facts of 1-4 symbols, 8-step rollouts (1200 s)"
run --resume "$OUT/stage-b.ckpt" --seed 15 --lr 1e-3 --seconds 1200 \
  --live-facts 8 --max-arity 4 --lifetime fixed --rollout 8 --checkpoint "$OUT/stage-b2.ckpt"

echo "stage D: up to 8 facts of 1-4 symbols, 24-step rollouts (720 s)"
run --resume "$OUT/stage-b2.ckpt" --seed 17 --lr 5e-4 --seconds 720 \
  --live-facts 8 --max-arity 4 --lifetime fixed --rollout 24 --checkpoint "$OUT/stage-d.ckpt" \
  --ship "$OUT/stage-d.safetensors"

# Stages 0-D ran the Updater on every step (empty_steps "update"): the state
# drifted on steps that tell nothing, and told facts were gone after ~100 of
# them. Stage E switches the model to "hold" (a step that tells nothing keeps
# the state exactly) and trains on with it, from D's parameters alone (no AdamW
# state, as the shipped file was made).
echo "stage E: empty_steps hold, up to 16 facts of 1-4 symbols, 8-step rollouts (3000 s)"
run --resume "$OUT/stage-d.safetensors" --empty-steps hold --seed 31 --lr 5e-4 --warmup 200 \
  --min-lr-ratio 0.2 --seconds 3000 --live-facts 16 --max-arity 4 --lifetime fixed --rollout 8 \
  --checkpoint "$OUT/stage-e.ckpt" --ship "$OUT/stage-e.safetensors"

echo "stage F: the same, on from E with its AdamW state (1440 s)"
run --resume "$OUT/stage-e.ckpt" --seed 37 --lr 3e-4 --warmup 100 --min-lr-ratio 0.1 \
  --seconds 1440 --live-facts 16 --max-arity 4 --lifetime fixed --rollout 8 \
  --checkpoint "$OUT/stage-f.ckpt" --ship "$OUT/stage-f.safetensors"

# Stages B-F drew K log-uniform from 1 (half the worlds held 4 facts or fewer)
# and told at most 4 facts a step over 8 steps: a world of 16 facts was rarely
# all told before its rollout ended, so the model was seldom trained on what
# bench_memory asks at K = 16 (training accuracy sat at 98% while K = 16 was
# at 81%). Stage G trains on worlds of 6 to 24 facts, told up to 6 a step over
# 16-step rollouts, from F's parameters (no AdamW state): K = 4 / 8 / 16 / 64
# from 97.9 / 92.8 / 81.0 / 60.2% to 98.9 / 97.2 / 89.2 / 63.9%. It ran 83,083
# iterations in 4,500 s on 1 thread beside another such job (paused at times
# for benchmarks: the wall time counts the pauses, the iterations do not).
# The same stage from F widened to 64 state tokens (W_0 and P duplicated, P's
# copies perturbed), on the same budget, reached the same figures (99.1 / 97.2 /
# 88.5 / 64.5%) at twice the serving cost: not kept.
echo "stage G: 6 to 24 facts, up to 6 instructions a step, 16-step rollouts (83083 iterations)"
run --resume "$OUT/stage-f.safetensors" --seed 41 --lr 3e-4 --warmup 200 --min-lr-ratio 0.1 \
  --iters 83083 --live-facts 24 --live-facts-min 6 --instr-per-step 6 --max-arity 4 \
  --lifetime fixed --rollout 16 --checkpoint "$OUT/stage-g.ckpt" --ship "$OUT/stage-g.safetensors"

# Stage H: the same again from G's checkpoint (with its AdamW state, from
# iteration 83,083 where G ended), a new cosine from 2e-4 over 2,700 s: K = 4 /
# 8 / 16 / 64 from 98.9 / 97.2 / 89.2 / 63.9% to 99.5 / 97.8 / 89.4 / 64.4%,
# and K = 4 told-true after 10 chatter steps from 49% to 69%. It ran 71,906
# iterations on 1 thread (about 3,700 trajectory steps/s), mostly alone.
echo "stage H: stage G's task again, on from G with its AdamW state (2700 s)"
run --resume "$OUT/stage-g.ckpt" --seed 43 --lr 2e-4 --warmup 100 --min-lr-ratio 0.1 \
  --seconds 2700 --live-facts 24 --live-facts-min 6 --instr-per-step 6 --max-arity 4 \
  --lifetime fixed --rollout 16 --checkpoint "$OUT/stage-h.ckpt" --ship "$OUT/stage-h.safetensors"

# Stage I: stage H's task with chatter (each world its own rate, up to one step
# in two, of facts over fresh symbols that are never asked about), on from H's
# checkpoint, a new cosine from 2e-4 over 4,200 s (105,919 iterations on 1
# thread, beside another such job at first). bench_memory K = 4 / 16 / 64 from
# 99.5 / 89.4 / 64.4% to 99.5 / 91.4 / 66.6%; K = 4 told-true after 4 and 10
# chatter steps (--chatter 1) from 96.1 / 69.0% to 98.7 / 90.1%; K = 8 with one
# fact a step (--instr-per-step 1) from 94.1 to 96.0% (seed 11, 384 episodes).
# The same stage with worlds of 4 to 16 facts and 24-step rollouts fell behind
# it in the first 500 s (K = 8 95.2 against 96.2%) and was stopped. Also tried
# and not kept: H made deeper, 3+3 layers (--add-layers 1: the new layers start
# as the identity), on this stage's task for 5,000 s (88,079 iterations, no
# AdamW state): the same figures (K = 4 / 16 / 64 99.6 / 91.5 / 66.6%; K = 8
# with one fact a step 96.3%; K = 4 told-true after 10 chatter steps 84.9%)
# at 1.6 times the serving cost (bench_threads: 4,147 against 6,644 steps/s at
# batch 1).
echo "stage I: stage H's task with chatter, on from H with its AdamW state (4200 s)"
run --resume "$OUT/stage-h.ckpt" --seed 47 --lr 2e-4 --warmup 100 --min-lr-ratio 0.1 \
  --seconds 4200 --live-facts 24 --live-facts-min 6 --instr-per-step 6 --chatter-rate 0.5 \
  --max-arity 4 --lifetime fixed --rollout 16 --checkpoint "$OUT/stage-i.ckpt" \
  --ship "$OUT/stage-i.safetensors"

# Stage J: stage I's task again, on from I's checkpoint with its AdamW state, a
# new cosine from 1.5e-4 over 5,400 s (about 120,150 iterations on 1 thread,
# beside another such job and benchmarks). bench_memory
# K = 4 / 8 / 16 / 64 from 99.5 / 98.2 / 91.4 / 66.6% to 99.8 / 98.7 / 92.3 /
# 68.6%; K = 8 with one fact a step from 96.0 to 97.3%; K = 4 told-true after
# 10 chatter steps from 90.1 to 85.7% (after 4: 98.7 to 99.2%); the end-to-end
# slice (test_server_memory) from 98.4 to 98.8%. The same stage with worlds of
# 10 to 32 facts and 20-step rollouts (seed 59, beside it) ended at K = 8 / 16
# 98.4 / 92.9% (seed 11, 384 episodes; J: 98.6 / 93.4%), K 4 after 10 chatter
# steps 90.3%: not kept.
echo "stage J: stage I's task again, on from I with its AdamW state (5400 s)"
run --resume "$OUT/stage-i.ckpt" --seed 53 --lr 1.5e-4 --warmup 100 --min-lr-ratio 0.1 \
  --seconds 5400 --live-facts 24 --live-facts-min 6 --instr-per-step 6 --chatter-rate 0.5 \
  --max-arity 4 --lifetime fixed --rollout 16 --checkpoint "$OUT/stage-j.ckpt" \
  --ship "$OUT/stage-j.safetensors"

# Stage K: stage J's task again, from J's parameters alone (the checkpoint with
# J's AdamW state was not kept), a warmup of 300 iterations and a new cosine from
# 1.2e-4 over 6,300 s (142,321 iterations on 1 thread, beside another such job;
# about 1,450 trajectory steps/s). bench_memory (1,024 episodes) K = 8 / 16 from
# 98.6 / 93.1% to 98.9 / 94.4%; seed 11, 384 episodes: K = 4 / 8 / 16 from
# 99.9 / 98.6 / 93.4% to 99.9 / 98.9 / 94.5%, K = 8 with one fact a step from
# 97.3 to 97.8%, K = 4 told-true after 10 chatter steps from 87.9 to 92.3%; the
# end-to-end slice (test_server_memory) from 98.75 to 99.4%. For the first half
# hour (lr near its peak) it was below J on every figure, then above. Beside it,
# the same from J at a peak of 4e-5 over 3,900 s ended a little lower (K = 16
# 94.0%, K = 4 after 10 chatter steps 90.7%), and worlds of 4 to 16 facts
# trailed both after 40 minutes and were stopped: not kept.
# Not kept, after it: stage K's task again from K's checkpoint with its AdamW
# state (seed 67, a peak of 8e-5, warmup 100, cosine over 4,500 s, 1 thread
# alone, 129,848 iterations). bench_memory (1,024 episodes, seeds 5 and 7)
# K = 8 / 16 from 98.9 / 94.4% to 99.1 / 94.8%; seed 11, 384 episodes K = 8
# with one fact a step 97.8 -> 98.2%; but K = 4 told-true after 10 chatter
# steps 92.3 -> 89.3% and the end-to-end slice 99.4 -> 99.1%: too little
# gained, and a figure README states lost.
echo "stage K: stage J's task again, from J's parameters (6300 s)"
run --resume "$OUT/stage-j.safetensors" --seed 61 --lr 1.2e-4 --warmup 300 --min-lr-ratio 0.1 \
  --seconds 6300 --live-facts 24 --live-facts-min 6 --instr-per-step 6 --chatter-rate 0.5 \
  --max-arity 4 --lifetime fixed --rollout 16 --checkpoint "$OUT/stage-k.ckpt" \
  --ship "$OUT/stage-k.safetensors"

# Stage L: stage K's task with told-moves worlds (--relational-rate 0.5: half the
# worlds are entities moving between values of a relation, each move told in
# full, the value left false beside the new one true, as an app that does not
# know the rule tells a household), from K's parameters, a warmup of 300 and a
# new cosine from 2e-4 over 4,200 s (128,180 iterations on 1 thread beside
# another such job, about 1,950 trajectory steps/s). K answered those worlds far
# worse than its own (worldstate-train eval --relational-rate 1 --live-facts 16
# --live-facts-min 8, 1,024 trajectories, eval seed 5: 93.7 / 84.8% at steps 8 /
# 16; the value held now 85.0 / 79.2%), and the example assistant's households
# (clients/python/example_assistant.py, 100 households, seed 11, training off)
# 93.3% at 6 steps (holds now 74.0%), 89.0% at 12. After L: told-moves worlds
# 98.3 / 94.6% (the value held 96.7 / 96.0%), households 96.7% (holds now
# 89.8%) and 95.2%; bench_memory (1,024 episodes, seed 5) K = 4 / 8 / 16 / 64 from
# 99.84 / 98.91 / 94.53 / 69.80% to 99.85 / 99.21 / 95.22 / 68.89%; K = 4 after
# 10 chatter steps (seed 11) told-true 91.3 -> 89.1%, overridden 72.9 -> 88.0%.
# Beside it, the same at a quarter of the worlds told-moves and a peak of
# 1.2e-4 (seed 73) ended lower on both (told-moves 97.8 / 93.4%, K = 16
# 94.59%, households 96.7 / 94.2%): not kept.
echo "stage L: stage K's task, half the worlds told-moves worlds, from K's parameters (4200 s)"
run --resume "$OUT/stage-k.safetensors" --seed 79 --lr 2e-4 --warmup 300 --min-lr-ratio 0.1 \
  --seconds 4200 --live-facts 24 --live-facts-min 6 --instr-per-step 6 --chatter-rate 0.5 \
  --relational-rate 0.5 --max-arity 4 --lifetime fixed --rollout 16 \
  --checkpoint "$OUT/stage-l.ckpt" --ship "$OUT/stage-l.safetensors"

# Stage M: stage L's task again, from L's parameters alone, a warmup of 300 and a
# new cosine from 1.2e-4 over 5,400 s (194,025 iterations on 1 thread, about
# 2,300 trajectory steps/s, beside other work). Every figure L was judged on rose
# but one: bench_memory (1,024 episodes, seed 5) K = 4 / 8 / 16 / 64 from 99.85 /
# 99.21 / 95.21 / 68.89% to 99.94 / 99.22 / 96.14 / 70.98% (seed 7, K = 16: 94.94
# -> 96.22%); told-moves worlds (eval as for L) 98.30 / 94.58% -> 99.01 / 96.10%
# at steps 8 / 16; the example assistant (100 households, seed 11, training off)
# 96.7 -> 97.9% at 6 steps (holds now 89.8 -> 93.1%), 95.2 -> 95.6% at 12; K = 4
# after 10 chatter steps (seed 11, 384 episodes) told-true 88.8 -> 93.8%, all
# 92.2 -> 94.5% (overridden 87.8 -> 86.2%); K = 8 with one fact a step 98.2 ->
# 99.0%; the end-to-end slice (test_server_memory) 99.4 -> 100%. Its first half
# hour (lr near its peak) was below L on K = 8 (98.98%), as K's was below J.
echo "stage M: stage L's task again, from L's parameters (5400 s)"
run --resume "$OUT/stage-l.safetensors" --seed 83 --lr 1.2e-4 --warmup 300 --min-lr-ratio 0.1 \
  --seconds 5400 --live-facts 24 --live-facts-min 6 --instr-per-step 6 --chatter-rate 0.5 \
  --relational-rate 0.5 --max-arity 4 --lifetime fixed --rollout 16 \
  --checkpoint "$OUT/stage-m.ckpt" --ship "$OUT/stage-m.safetensors"

# Stage N: stage M's task again, from M's parameters alone, a warmup of 300 and a
# new cosine from 1e-4 over 5,400 s (174,722 iterations on 1 thread beside another
# such job, about 2,070 trajectory steps/s). Every figure M was judged on rose:
# bench_memory (1,024 episodes, seed 5) K = 4 / 8 / 16 / 64 from 99.94 / 99.22 /
# 96.14 / 70.98% to 99.94 / 99.35 / 96.68 / 72.13% (seed 7, K = 8 / 16: 99.22 /
# 96.22 -> 99.35 / 96.84%); told-moves worlds 99.01 / 96.10% -> 99.24 / 96.63% at
# steps 8 / 16; the example assistant (100 households, seed 11, training off) 97.9
# -> 98.4% at 6 steps (holds now 93.1 -> 94.1%), 95.6 -> 96.1% at 12; K = 4 after
# 10 chatter steps told-true 93.8 -> 94.7%, all 94.5 -> 95.5%; K = 8 with one fact
# a step 99.0 -> 99.3%. Beside it, the same from M on worlds of 10 to 32 facts
# (--live-facts 32 --live-facts-min 10, seed 97) reached about the same at K = 16
# / 64 (96.77 / 72.76%) but lost K = 4 after 10 chatter steps (told-true 91.7%):
# not kept.
echo "stage N: stage M's task again, from M's parameters (5400 s)"
run --resume "$OUT/stage-m.safetensors" --seed 89 --lr 1e-4 --warmup 300 --min-lr-ratio 0.1 \
  --seconds 5400 --live-facts 24 --live-facts-min 6 --instr-per-step 6 --chatter-rate 0.5 \
  --relational-rate 0.5 --max-arity 4 --lifetime fixed --rollout 16 \
  --checkpoint "$OUT/stage-n.ckpt" --ship "$OUT/stage-n.safetensors"

# Stage O: stage N's task again, from N's parameters alone, at batch 128 (twice
# N's): a warmup of 300 and a new cosine from 1e-4 over 5,280 s (66,136
# iterations on 1 thread beside another such job, about 1,600 trajectory
# steps/s). Every figure N was judged on rose or held: bench_memory (1,024
# episodes, seed 5) K = 4 / 8 / 16 / 64 from 99.94 / 99.35 / 96.68 / 72.13% to
# 99.95 / 99.42 / 96.86 / 72.64% (seed 7, K = 8 / 16: 99.35 / 96.84 -> 99.42 /
# 97.00%); told-moves worlds 99.24 / 96.63% -> 99.29 / 96.83% at steps 8 / 16;
# K = 8 with one fact a step 99.3 -> 99.4%; K = 4 after 10 chatter steps (seed
# 11, 1,024 episodes) all 95.5 -> 96.0% (told-true 94.7 -> 94.4%, after 4 steps
# 99.5% both); the example assistant (100 households, training off, seeds 11 /
# 21 / 31) 98.4 / 97.9 / 98.2 -> 98.3 / 98.2 / 98.4% at 6 steps, 96.1 / 96.4 /
# 96.1 -> 96.1 / 96.2 / 96.5% at 12. Beside it, the same at batch 64 (seed 103,
# lr 8e-5, 5,400 s, 141,703 iterations) reached K = 16 96.88% but lost chatter
# told-true (94.10%): not kept. After O, run and not shipped yet (2 threads,
# beside other work): O's task from O's parameters at --batch 256 --seed 109
# --lr 8e-5 --seconds 4200 (35,014 iterations) reached bench_memory seed 5 K = 4
# / 8 / 16 / 64 99.99 / 99.44 / 97.06 / 72.81%, seed 7 K = 8 / 16 99.44 /
# 97.15%, told-moves 99.36 / 96.96%, the example assistant (seed 11) 98.6 /
# 96.2%, but K = 4 after 10 chatter steps told-true 94.30% (O 94.40%) and K = 8
# with one fact a step 99.30% (O 99.38%).
# Also run after O and not shipped (too little gained for the figures a new
# default makes to measure again): O's task from O's parameters at --batch 256
# --seed 113 --lr 8e-5 --warmup 300 --seconds 4800 on 2 threads in chunks
# (66,960 iterations, 3,571 trajectory steps/s with other work beside it).
# Every figure rose a little: bench_memory seed 5 K = 4 / 8 / 16 / 64 99.98 /
# 99.48 / 97.10 / 72.93%, seed 7 K = 8 / 16 99.48 / 97.21%, K = 8 with one fact a
# step 99.43%, K = 4 after 10 chatter steps 96.18% (told-true 94.56%), told-moves
# worlds 99.35 / 97.00% at steps 8 / 16.
echo "stage O: stage N's task at batch 128, from N's parameters (5280 s)"
run --resume "$OUT/stage-n.safetensors" --batch 128 --seed 107 --lr 1e-4 --warmup 300 \
  --min-lr-ratio 0.1 --seconds 5280 --live-facts 24 --live-facts-min 6 --instr-per-step 6 \
  --chatter-rate 0.5 --relational-rate 0.5 --max-arity 4 --lifetime fixed --rollout 16 \
  --checkpoint "$OUT/stage-o.ckpt" --ship "$OUT/stage-o.safetensors"

# The shipped file is stage O's parameters in 2 views (model/views.c: the same
# facts on a second set of codes of their symbols, the answer σ of the mean of
# the views' logits), no training: bench_memory (--ks 4,8,16,64,256 --delays
# 1,10,100,1000,10000 --traj 1024 --seed 5, the same at every delay) K = 4 / 8 /
# 16 / 64 / 256 from 99.95 / 99.42 / 96.86 / 72.63 / 60.34% to 100 / 99.99 /
# 99.58 / 77.82 / 61.84%, at twice the serving cost. Three views: K = 16 99.90%
# (--ks 16 --delays 1 --seed 7), three times the cost.
echo "views: stage O's parameters in 2 views"
$TRAIN eval --task memory --checkpoint "$OUT/stage-o.safetensors" --views 2 \
  --trajectories 64 --horizons 8 --ship "$OUT/default.safetensors"
echo "benchmark:"
build/bench/bench_memory --checkpoint "$OUT/default.safetensors" --ks 4,8,16,64 \
  --delays 1,10,100,1000,10000 | tee "$OUT/bench_memory.txt"
