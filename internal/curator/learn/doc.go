// Package learn is the Curator's learned tiering scheduler: one-step
// Q-learning with a linear function approximator that decides, at each
// poll, whether to run tiering now (Curator §4.3; docs/design/0006).
//
// It owns:
//
//   - Observation: the state the agent senses — the paper's (cpu, mem,
//     ssd usage, iops, read iops, write iops) plus documented extensions
//     (recent client latency, slower-tier usage) a model may opt into by
//     naming them in Model.Features.
//   - Model: one linear model per action over standardized features,
//     trained by stochastic gradient descent on the squared TD error, with
//     the learning rate α, discount γ and exploration rate ε it was
//     trained for. It serialises to JSON (ParseModel validates it) so the
//     metadata store can keep it across master failovers.
//   - Agent: the deployed learner as a state machine. Each poll the caller
//     pushes logical time and an Observation; the agent turns the client
//     latency seen since its last decision into the reward (r = −latency,
//     in milliseconds), updates the model, and picks the next action
//     ε-greedily — ε decaying with the model's experience (pre-training
//     included), and no exploratory run while the fast tier is below a
//     fill. After a run it holds for a while (10 minutes) so tiering jobs
//     are not scheduled back to back.
//   - Pretrain: batch fitted-Q training on transitions collected from the
//     threshold policy (§4.3.3: standardize, 80/20 split, 3-fold cross
//     validation of the learning rate, SGD on the squared loss).
//
// The package is pure: no I/O, no goroutines, no clock (time arrives as
// an argument), randomness only from a *rand.Rand the caller seeds. Same
// model, observation and seed, same action. It imports only model and the
// standard library (imports_test.go), so the same code runs in the
// Curator, in tests and in the simulator (internal/curator/tiersim). It
// must never move data or know how a tiering job is run: mapping an
// action to tiering options is internal/curator/tiersched's job.
//
// Types here are not safe for concurrent use; the Curator serialises its
// calls under its own lock.
package learn
