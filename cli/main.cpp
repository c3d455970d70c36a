// pens: the command-line tool. One subcommand per task; `pens CMD --help` for each.
#include <filesystem>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/ensemble_args.h"
#include "pens/ops/ir/error.h"
#include "pens/ops/ir/memory.h"
#include "pens/ops/ir/suggest.h"

namespace {

using pens::cli::Command;

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {
      {"ops", "list the registered ops",
       "usage: pens ops [--json]\n\n"
       "Lists every registered op with its arity, which inputs are differentiable,\n"
       "whether it is stochastic, and its attributes.\n\n"
       "  --json   print a JSON array instead of a table\n",
       pens::cli::run_ops},
      {"kinds", "list the registered noise kinds, penalty kinds and optimizers",
       "usage: pens kinds [--json]\n\n"
       "Lists what model files and configs can name besides ops: noise kinds (node\n"
       "annotations) with their parameters, penalty kinds (PEA agreement penalties) and\n"
       "optimizers with their settings. Programs that register their own kinds extend\n"
       "these lists (docs/adding-a-noise-kind.md, adding-a-penalty.md, adding-an-optimizer.md).\n\n"
       "  --json   print a JSON object instead of tables\n",
       pens::cli::run_kinds},
      {"gradcheck", "finite-difference gradient checks in double precision",
       "usage: pens gradcheck MODEL.json [options]\n"
       "       pens gradcheck --all-ops | --op NAME\n\n"
       "With a model file: checks the gradient of the model's whole training objective\n"
       "(its pseudo-ensemble: supervised loss plus penalties) with respect to every\n"
       "parameter, noise frozen at a key, against central differences.\n"
       "With --all-ops: checks every registered op (random shapes and values, fixed noise\n"
       "keys) and prints one line per op.\n"
       "The error of an entry is |analytic - numeric| / max(|analytic|, |numeric|, 1e-3);\n"
       "the exit status is 1 when any entry exceeds the tolerance. An entry that misses\n"
       "at step h is refined at h/2, h/4, ... by Richardson extrapolation, so truncation\n"
       "error where the objective curves strongly is not reported as a wrong gradient.\n"
       "Models above 10,000 parameter elements are sampled: 64 elements per tensor (the\n"
       "largest gradients, some zero values, the rest at random); a progress line with\n"
       "an estimate appears on stderr every 5 s while a check runs.\n\n"
       "  --all-ops       check every registered op\n"
       "  --op NAME       check one op\n"
       "  --tolerance T   largest error accepted (default 1e-6)\n"
       "  --step H        finite-difference step, relative to max(1, |value|) (default 1e-5)\n"
       "  --sample N      elements checked per parameter tensor, or 'all'\n"
       "  --init-seed S   seed of the parameter values checked at (default 1)\n"
       "  --threads T     threads (default: the CPUs this process may use)\n" +
           std::string(pens::cli::kEnsembleHelp),
       pens::cli::run_gradcheck},
      {"inspect", "print a model's pseudo-ensemble graph (text, DOT or JSON)",
       "usage: pens inspect MODEL.json [options]\n\n"
       "Builds the training graph of the model's pseudo-ensemble (the parent, its\n"
       "children, the supervised loss and the penalties, with unused nodes pruned) and\n"
       "prints it, with the tap table: for each penalized layer, the parent node and the\n"
       "children's partial-noise taps.\n\n"
       "  --format F     text (default), dot (Graphviz; children in clusters) or json\n" +
           std::string(pens::cli::kEnsembleHelp),
       pens::cli::run_inspect},
      {"fmt", "validate a model file and print its canonical form",
       "usage: pens fmt MODEL.json\n"
       "       pens fmt --check MODEL.json [MODEL.json ...]\n\n"
       "Reads the model (every problem is reported with the JSON path of the field) and\n"
       "prints it in canonical form: sorted keys, nodes in topological order, numbers that\n"
       "read back exactly.\n\n"
       "  --check   print nothing but the name of each file not in canonical form, and\n"
       "            exit 1 if there is one\n",
       pens::cli::run_fmt},
      {"new", "write a new model file",
       "usage: pens new mlp [options]\n"
       "       pens new ctn [options]\n"
       "       pens new ladder [options]\n\n"
       "Prints (or writes) a model file for a ReLU MLP, with noise annotations and a\n"
       "pseudo-ensemble spec.\n\n"
       "  --layers W0,W1,...      widths, input first (default 784,800,800,10)\n"
       "  --mask-input P          mask noise on the input\n"
       "  --mask-hidden P         mask noise on each hidden layer\n"
       "  --gaussian-input S      Gaussian noise on the input\n"
       "  --center DIR            subtract the mean training image of the MNIST files in DIR\n"
       "                          (stored in the model; the input noise then perturbs x - mean)\n"
       "  --gaussian-bias S       Gaussian noise on each hidden pre-activation\n"
       "  --noise N:K[:P=V,...][@C]  a noise annotation of kind K on node N, e.g.\n"
       "                          W2:fuzz:sigma=0.02 or W1:subspace:group=h1,keep=400,axes=1;\n"
       "                          repeatable, applied in order after the flags above; @C:\n"
       "                          only in children C (1+2), not every child\n"
       "  --max-norm C            L2 bound on each unit's incoming weights\n"
       "  --batch-norm            batch normalisation of each hidden pre-activation (no bias);\n"
       "                          running statistics follow the clean pass, read at inference\n"
       "  --batch-norm-output     with --batch-norm, the output's x.W normalised too (no bias)\n"
       "  --batch-norm-decay D    the running statistics' decay per update (default 0.99)\n"
       "  --teacher D             a mean teacher: child 1 reads moving averages (decay D) of the\n"
       "                          parameters, evaluation too; needs child-child pairing\n"
       "  --average-weights D     evaluate with moving averages (decay D) of the weights, which\n"
       "                          no child reads; pair with eval.recalibrate_statistics\n"
       "  --average-params R      with --average-weights, average only the parameters whose\n"
       "                          whole name matches the regular expression R (default .*)\n"
       "  --weight-std S          initial weight standard deviation (default 0.01); or one per\n"
       "                          weight matrix, comma-separated; or he: sqrt(2 / fan-in) each\n"
       "  --hidden-bias B         initial hidden biases (default 0.1)\n"
       "  --output-bias B         initial output biases (default 0)\n"
       "  --loss L                softmax_xent (default) or squared_hinge\n"
       "  --penalty N:K:L[:ROWS[:FLAGS]][@C]  a penalty of kind K (kl, xent, tanh, direction,\n"
       "                          l2, or any registered kind: pens kinds) on node N with weight\n"
       "                          L, on rows all|labeled|unlabeled; FLAGS, comma-separated:\n"
       "                          'fixed': the first side is a target that gets no gradient,\n"
       "                          'unscheduled': lambda stages do not scale it,\n"
       "                          'child-child' or 'parent-child': this term's pairing where it\n"
       "                          is not --pairing's, NAME=NUMBER: a parameter of the kind\n"
       "                          (threshold=0.95); @C: on children C (1+2) only; repeatable\n"
       "  --children K            children (default 2)\n"
       "  --pairing P             child-child (default) or parent-child\n"
       "  --loss-on N             parent (default), child or children\n"
       "  --batch-statistics S    with --batch-norm: own (default: each child normalises its\n"
       "                          own batch) or parent (the clean batch's statistics, held\n"
       "                          constant); or one per child, comma-separated (own,parent)\n"
       "  --statistics-by-part    normalise a batch's labeled and unlabeled rows each with\n"
       "                          their own statistics (as the VAT authors' separate passes)\n"
       "  --smoothing S           softmax smoothing before kl/xent (default 1e-4)\n"
       "  --description TEXT      stored in the metadata\n"
       "  --values SEED           store initial parameter values (drawn with SEED) inline\n"
       "  --output FILE           write FILE (atomically) instead of printing\n\n"
       "pens new ctn: the compact tensor network over sentiment trees (docs/trees.md)\n"
       "  --sst DIR               size the word vectors from DIR/train.txt's vocabulary\n"
       "  --min-count K           ... counting words seen at least K times (default 1)\n"
       "  --lowercase             ... and words that differ only in case as one\n"
       "  --vocabulary N          or give the number of words (<unk> included)\n"
       "  --dim N                 node vector size (default 70)\n"
       "  --classes C             5 (fine, default) or 2 (binary)\n"
       "  --tensor T              compact (n x n x n, default) or full (n x 2n x 2n)\n"
       "  --fuzz S                weight fuzzing sigma on every parameter (paper: 0.02)\n"
       "  --subspace K            latent dimensions kept per tree (paper: n/2)\n"
       "  --activation-noise S    Gaussian sigma on node vectors (paper: 0.05)\n"
       "  --word-std S            initial word vector std (default 0.1)\n"
       "  --leaf-tanh             leaves tanh(E[word]), as in the authors' code\n"
       "  --init I                scaled (default) or authors (M near the identity)\n"
       "  --penalty scores:KIND:LAMBDA  PEA between children on every node's scores\n"
       "  --children K            children for the penalty (default 2)\n"
       "  --description TEXT, --output FILE   as for mlp\n\n"
       "pens new ladder: a ladder network (Rasmus et al. 2015) as a pseudo-ensemble: the\n"
       "clean encoder the parent, the corrupted one and its decoder the child, the denoising\n"
       "costs l2 penalties against the parent's values (docs/pseudo-ensembles.md)\n"
       "  --layers W0,W1,...      widths, input first (default 784,1000,500,250,250,250,10)\n"
       "  --noise S               Gaussian sigma on the input and every normalised layer\n"
       "                          (default 0.3)\n"
       "  --input-noise S         ... but sigma S on the input (the ladder paper's code runs\n"
       "                          1000 labels with 0.3 on the input, 0.2 on the layers)\n"
       "  --denoising L0,L1,...   each layer's denoising weight, input first (default\n"
       "                          1000,10,0.1,0.1,0.1,0.1,0.1); times the mean square error\n"
       "  --denoising-rows R      the rows the denoising costs cover: all (default) or\n"
       "                          unlabeled (as the ladder paper's code; the default with\n"
       "                          --statistics-by-part)\n"
       "  --batch-norm-decay D    the running statistics' decay per update (default 0.99)\n"
       "  --estimate-statistics S whose batch statistics normalise the decoder's estimates\n"
       "                          before the costs: clean (the clean encoder's, the paper's;\n"
       "                          default) or child (the corrupted batch's own)\n"
       "  --statistics-by-part    normalise a batch's labeled and unlabeled rows each with\n"
       "                          their own statistics, the denoising costs on the unlabeled\n"
       "                          rows (as the ladder paper's code does)\n"
       "  --average-weights D     evaluate with moving averages (decay D) of the weights; pair\n"
       "                          with eval.recalibrate_statistics in the training config\n"
       "  --average-params R      with --average-weights, average only the parameters whose\n"
       "                          whole name matches R (e.g. 'W.*|beta.*|gamma.*', the encoder)\n"
       "  --noise-on N:K[:P=V,...][@C]  more noise, as mlp's --noise (e.g.\n"
       "                          x:adversarial:eps=1.0@2, in child 2 alone)\n"
       "  --children K            children (default 1), each corrupted with its decoder unless\n"
       "                          --ladder-children says otherwise\n"
       "  --ladder-children C     the ladder's noise and denoising costs in children C (1+2)\n"
       "                          only, so that the others carry other noise (--noise-on ...@C)\n"
       "  --loss-on N             child (default), children or parent\n"
       "  --batch-statistics S    own (default: each child normalises its own batch) or\n"
       "                          parent (the clean batch's statistics, held constant); or one\n"
       "                          per child, comma-separated (own,parent)\n"
       "  --penalty N:K:L[:ROWS[:FLAGS]]  a penalty beside the denoising costs, as mlp's (e.g.\n"
       "                          logits:xent:1:all:child-child, PEA between the children)\n"
       "  --description TEXT, --output FILE   as for mlp\n",
       pens::cli::run_new},
      {"average", "add moving averages of the weights to a model file, read at inference",
       "usage: pens average MODEL.json --decay D [--params REGEX] [--output FILE]\n\n"
       "Adds a moving average of each trained parameter P to the model (Polyak\n"
       "averaging): a frozen parameter average/P that starts at P's value and follows it\n"
       "after every step, read at inference in place of P. Training is unchanged; the\n"
       "model is evaluated with the averages. Pair it with eval.recalibrate_statistics in\n"
       "a batch-normalised network's config: its running statistics fit the raw weights.\n"
       "A model holding trained values keeps them, its averages starting at them.\n"
       "Prints the model file, or writes it (atomically; it may be MODEL itself).\n\n"
       "  --decay D        the average's decay per step, in [0, 1) (e.g. 0.999)\n"
       "  --params REGEX   average only the parameters whose whole name matches (default\n"
       "                   every trained one; e.g. 'W.*|beta.*|gamma.*', a ladder's encoder)\n"
       "  --output FILE    write here instead of printing (needed for a model with values)\n",
       pens::cli::run_average},
      {"train", "train a model on MNIST or sentiment trees from a config file",
       "usage: pens train CONFIG.json [options]\n\n"
       "Trains the model file the config names (its pseudo-ensemble: supervised loss on\n"
       "labeled rows, PEA penalties) as the config's kind of run says (`pens kinds`). A\n"
       "classifier (the default) trains on MNIST or another data source (data.source: npy\n"
       "for NumPy arrays) with the config's split, batch composition, optimizer schedules\n"
       "and length (docs/training.md). Writes to the output folder: metrics.jsonl (one\n"
       "line per evaluation), summary.json, config.json, model.json, best.model.json,\n"
       "checkpoint.pens, learning-curve.png and filters.png. A NaN or Inf stops the run\n"
       "with exit status 1, keeping the last good checkpoint.\n"
       "A config with a \"task\" (fine or binary), or \"kind\": \"trees\", trains a tree\n"
       "model on the Stanford Sentiment Treebank instead (docs/trees.md); --data-dir then\n"
       "names the treebank folder, --init takes word vectors (pens pretrain on a skip-gram\n"
       "config).\n"
       "Under mpirun (mpirun -np P pens train CONFIG.json) one run is spread over P\n"
       "processes or machines, each computing 1/P of every batch or step's trees\n"
       "(docs/distributed.md).\n\n"
           + pens::cli::train_options_help(),
       pens::cli::run_train},
      {"config", "print a config as pens reads it, its bases resolved",
       "usage: pens config CONFIG.json\n\n"
       "Prints the config with the configs it names as \"base\" laid under it (each\n"
       "member over the base's, objects merged, null removing one; docs/training.md):\n"
       "what pens train and pens pretrain read. A run folder's config.json is this, with\n"
       "every default written.\n",
       pens::cli::run_config},
      {"pretrain", "denoising-autoencoder pre-training of a network's hidden layers",
       "usage: pens pretrain CONFIG.json [options]\n\n"
       "Trains each layer the config lists, bottom-up, as the encoder of a denoising\n"
       "autoencoder (tied weights, the config's corruption as noise annotations on the\n"
       "layer's input, squared-error reconstruction of the clean input) on all MNIST\n"
       "training images, labels unused (docs/training.md). Writes to the output folder:\n"
       "metrics.jsonl (a line per layer and epoch), summary.json, config.json, model.json\n"
       "(the network with its pre-trained values; fine-tune it with pens train --init),\n"
       "filters.png and checkpoint.pens (the run goes through pens train's loop, a stage\n"
       "per layer).\n\n"
       "  --out DIR              output folder (default runs/<config name>)\n"
       "  --epochs E             epochs per layer, for every layer\n"
       "  --seed S               seed of batch order and corruption\n"
       "  --data-dir DIR         folder of the MNIST IDX files (default data/mnist)\n"
       "  --threads T            threads (0: the CPUs this process may use)\n"
       "  --resume               continue from the output folder's checkpoint.pens\n"
       "  --budget-minutes M     stop after M minutes of wall-clock time\n\n"
       "A config with \"task\": \"skipgram\" pre-trains the word vectors of a tree network\n"
       "instead (skip-gram with negative sampling on the treebank's training and dev\n"
       "sentences; docs/trees.md); --data-dir then names the treebank folder.\n",
       pens::cli::run_pretrain},
      {"eval", "error and confusion matrix of a trained model (MNIST, or SST for tree models)",
       "usage: pens eval MODEL.json|RUN_DIR [options]\n\n"
       "Evaluates the clean parent network (or the mean of sampled children) of a model\n"
       "file holding trained values, and prints its error and confusion matrix. Given a\n"
       "run folder of pens train, it evaluates the run's best.model.json on the data (and\n"
       "tree runs: with the vocabulary) its config.json names; options override them.\n\n"
       "  --data PART       test (default) or train\n"
       "  --data-dir DIR    folder of the MNIST IDX files (default data/mnist)\n"
       "  --samples K       average softmax over K sampled children instead (default 0)\n"
       "  --seed S          noise seed of the sampled children (default 1)\n"
       "  --batch B         rows per forward pass (default 1000)\n\n"
       "Tree models: root accuracy and all-node accuracy on SST (the task follows from the\n"
       "model's classes), with the roots' confusion matrix.\n"
       "  --data PART       train, dev or test (default)\n"
       "  --data-dir DIR    the treebank folder (default ../shared/data/sst)\n"
       "  --min-count K     the vocabulary's min_count, as in training (default 1)\n"
       "  --lowercase       the vocabulary lowercased, as in training's data.lowercase\n"
       "  --samples K       subspace models: draws averaged per tree (default 50)\n"
       "  --task binary     a fine-grained model on the binary task: positive where\n"
       "                    P(3) + P(4) > P(0) + P(1), on the non-neutral roots\n",
       pens::cli::run_eval},
  };
  return all;
}

// The option every command takes: --memory-limit GB (or --memory-limit=GB), removed from
// `args` and applied (ops/ir/memory.h).
void take_memory_limit(std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string value;
    size_t taken = 1;
    if (args[i] == "--memory-limit") {
      if (i + 1 == args.size()) pens::fail("--memory-limit needs a value (GiB)");
      value = args[i + 1];
      taken = 2;
    } else if (args[i].rfind("--memory-limit=", 0) == 0) {
      value = args[i].substr(15);
    } else {
      continue;
    }
    size_t end = 0;
    double gb = 0;
    try {
      gb = std::stod(value, &end);
    } catch (const std::exception&) {
      end = 0;
    }
    if (end == 0 || end != value.size() || !(gb > 0) || gb > 1e9) {
      pens::fail("--memory-limit '", value, "' is not a memory size in GiB (a number above 0)");
    }
    pens::set_memory_limit(static_cast<uint64_t>(gb * 1024 * 1024 * 1024));
    args.erase(args.begin() + static_cast<std::ptrdiff_t>(i), args.begin() + static_cast<std::ptrdiff_t>(i + taken));
    --i;
  }
}

// "runs/x: File exists (cannot create directories)" from the library's "filesystem error:
// cannot create directories: File exists [runs/x]".
std::string filesystem_problem(const std::filesystem::filesystem_error& e) {
  std::string operation = e.what();
  const std::string prefix = "filesystem error: ", reason = ": " + e.code().message();
  if (operation.rfind(prefix, 0) == 0) operation.erase(0, prefix.size());
  if (const size_t at = operation.find(reason); at != std::string::npos) operation.erase(at);
  std::string paths = e.path1().string();
  if (!e.path2().empty()) paths += " -> " + e.path2().string();
  return pens::cat(paths.empty() ? "" : paths + ": ", e.code().message(), " (", operation, ")");
}

void print_help() {
  std::cout << "pens: pseudo-ensembles on a static computation graph\n\n"
               "usage: pens COMMAND [options]\n\ncommands:\n";
  for (const Command& c : commands()) {
    std::cout << "  " << c.name << std::string(12 - c.name.size(), ' ') << c.summary << "\n";
  }
  std::cout << "\n`pens COMMAND --help` describes a command.\n\n"
               "Every command also takes --memory-limit GB: the most memory pens' buffers may\n"
               "take (default 90% of the machine's; also PENS_MEMORY_LIMIT=GB). Larger batches\n"
               "or layers are refused before anything is allocated.\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    if (args.size() >= 2 && args[0] == "help") {
      for (const Command& c : commands()) {
        if (c.name == args[1]) {
          std::cout << c.usage;
          return 0;
        }
      }
    }
    print_help();
    return args.empty() ? 2 : 0;
  }
  for (const Command& c : commands()) {
    if (c.name != args[0]) continue;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    for (const std::string& a : rest) {
      if (a == "--help" || a == "-h") {
        std::cout << c.usage;
        return 0;
      }
    }
    try {
      take_memory_limit(rest);
      return c.run(rest);
    } catch (const pens::Error& e) {
      std::cerr << "pens " << c.name << ": error: " << e.what() << "\n";
      return 1;
    } catch (const std::filesystem::filesystem_error& e) {
      // A path the user gave that cannot be used (an --out that is a file or lies under
      // one, a folder not writable, a symbolic-link loop): their mistake, told in a line.
      std::cerr << "pens " << c.name << ": error: " << filesystem_problem(e) << "\n";
      return 1;
    } catch (const std::bad_alloc&) {
      std::cerr << "pens " << c.name << ": internal error: out of memory in an allocation pens' memory limit ("
                << pens::format_bytes(pens::memory_limit()) << ") does not cover; please report it\n";
      return 3;
    } catch (const std::exception& e) {
      std::cerr << "pens " << c.name << ": internal error: " << e.what() << "\n";
      return 3;
    }
  }
  std::vector<std::string> names;
  for (const Command& c : commands()) names.push_back(c.name);
  std::cerr << "pens: unknown command '" << args[0] << "'" << pens::unknown_name_hint(args[0], names, "", 0) << "\n\n";
  print_help();
  return 2;
}
