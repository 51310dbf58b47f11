// dist_env.cpp — the rank environment of each launcher (see dist_env.h).
#include "hybridscope/trainer/dist/dist_env.h"

#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

namespace hs::trainer {

namespace {

int parse_env_int(const char* name, const char* value, int min_value) {
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || v < min_value || v > 1 << 20)
    throw DistError(fmt::format("environment variable {}='{}' is not an integer >= {}; set it to this rank's value "
                                "(hybridscope launch, torchrun, srun and mpirun set it)",
                                name, value, min_value));
  return static_cast<int>(v);
}

bool truthy(const char* v) {
  const std::string_view s = v ? v : "";
  return s == "1" || s == "True" || s == "true" || s == "TRUE";
}

class Vars {
 public:
  explicit Vars(const EnvLookup& lookup) : lookup_(lookup) {}
  const char* operator()(const char* name) const {
    const char* v = lookup_(name);
    return (v && *v) ? v : nullptr;
  }
  int integer(const char* name, int min_value) const { return parse_env_int(name, (*this)(name), min_value); }
  int integer_or(const char* name, int min_value, int fallback) const {
    const char* v = (*this)(name);
    return v ? parse_env_int(name, v, min_value) : fallback;
  }

 private:
  const EnvLookup& lookup_;
};

void check_rank_in_world(const DistEnv& env, const char* rank_var, const char* world_var) {
  if (env.rank >= env.world_size)
    throw DistError(fmt::format("{}={} is not below {}={}: ranks count 0 .. {}-1", rank_var, env.rank, world_var,
                                env.world_size, world_var));
}

void read_master(const Vars& get, DistEnv& env) {
  if (const char* addr = get("MASTER_ADDR")) env.master_addr = addr;
  env.master_port = get.integer_or("MASTER_PORT", 1, env.master_port);
  if (env.master_port > 65535)
    throw DistError(fmt::format("MASTER_PORT={} is not a TCP port (1..65535)", env.master_port));
}

// RANK, WORLD_SIZE, LOCAL_RANK as torchrun and `hybridscope launch` set them.
void read_rank_variables(const Vars& get, DistEnv& env) {
  const char* rank = get("RANK");
  const char* world = get("WORLD_SIZE");
  if (!rank || !world)
    throw DistError(fmt::format("{} is set but {} is not: set both (hybridscope launch, torchrun, srun and mpirun "
                                "set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)",
                                rank ? "RANK" : "WORLD_SIZE", rank ? "WORLD_SIZE" : "RANK"));
  env.world_size = parse_env_int("WORLD_SIZE", world, 1);
  env.rank = parse_env_int("RANK", rank, 0);
  check_rank_in_world(env, "RANK", "WORLD_SIZE");
  env.local_rank = get.integer_or("LOCAL_RANK", 0, env.rank);
  read_master(get, env);
}

// mpirun or srun read the world; a RANK/WORLD_SIZE/LOCAL_RANK beside it must say the same.
void check_agrees(const Vars& get, const char* plain, int value, const char* source_var, const char* source) {
  const char* v = get(plain);
  if (!v) return;
  const int plain_value = parse_env_int(plain, v, 0);
  if (plain_value != value)
    throw DistError(fmt::format("conflicting rank environment: {}={} but {}={} ({} started this process). Unset {} "
                                "(a stale export in the job script?) or start the ranks with one launcher only",
                                plain, plain_value, source_var, value, source, plain));
}

void read_mpirun(const Vars& get, DistEnv& env) {
  if (!get("OMPI_COMM_WORLD_RANK") || !get("OMPI_COMM_WORLD_SIZE"))
    throw DistError("OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE must both be set (Open MPI's mpirun sets both)");
  env.launcher = Launcher::kMpirun;
  env.world_size = get.integer("OMPI_COMM_WORLD_SIZE", 1);
  env.rank = get.integer("OMPI_COMM_WORLD_RANK", 0);
  check_rank_in_world(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
  env.local_rank = get.integer_or("OMPI_COMM_WORLD_LOCAL_RANK", 0, env.rank);
  env.node_rank = get.integer_or("OMPI_COMM_WORLD_NODE_RANK", 0, 0);
  const int local_size = get.integer_or("OMPI_COMM_WORLD_LOCAL_SIZE", 1, env.world_size);
  if (!get("MASTER_ADDR") && local_size != env.world_size)
    throw DistError(fmt::format("mpirun started {} ranks over several nodes ({} on this one) and MASTER_ADDR is not "
                                "set: pass node 0's address, e.g. mpirun -x MASTER_ADDR=<host of rank 0> -x "
                                "MASTER_PORT=29500 ...",
                                env.world_size, local_size));
  read_master(get, env);
  check_agrees(get, "WORLD_SIZE", env.world_size, "OMPI_COMM_WORLD_SIZE", "mpirun");
  check_agrees(get, "RANK", env.rank, "OMPI_COMM_WORLD_RANK", "mpirun");
  check_agrees(get, "LOCAL_RANK", env.local_rank, "OMPI_COMM_WORLD_LOCAL_RANK", "mpirun");
}

void read_slurm(const Vars& get, DistEnv& env) {
  if (!get("SLURM_PROCID") || !get("SLURM_NTASKS"))
    throw DistError("a Slurm step (SLURM_STEP_ID set) without SLURM_PROCID and SLURM_NTASKS: start the ranks with "
                    "srun --ntasks=N");
  env.launcher = Launcher::kSlurm;
  env.world_size = get.integer("SLURM_NTASKS", 1);
  env.rank = get.integer("SLURM_PROCID", 0);
  check_rank_in_world(env, "SLURM_PROCID", "SLURM_NTASKS");
  env.local_rank = get.integer_or("SLURM_LOCALID", 0, 0);
  env.node_rank = get.integer_or("SLURM_NODEID", 0, 0);
  if (!get("MASTER_ADDR")) {
    const char* nodes = get("SLURM_STEP_NODELIST") ? get("SLURM_STEP_NODELIST") : get("SLURM_JOB_NODELIST");
    if (!nodes)
      throw DistError("a Slurm step without SLURM_STEP_NODELIST or SLURM_JOB_NODELIST: set MASTER_ADDR to the host "
                      "of task 0");
    env.master_addr = expand_slurm_nodelist(nodes).front();
  }
  if (!get("MASTER_PORT") && get("SLURM_JOB_ID"))
    env.master_port = 20000 + get.integer("SLURM_JOB_ID", 0) % 20000;  // one job's steps share it: see dist_env.h
  read_master(get, env);
  check_agrees(get, "WORLD_SIZE", env.world_size, "SLURM_NTASKS", "srun");
  check_agrees(get, "RANK", env.rank, "SLURM_PROCID", "srun");
  check_agrees(get, "LOCAL_RANK", env.local_rank, "SLURM_LOCALID", "srun");
}

// "01-03,7" -> 01 02 03 7 (each range keeps the width of its first bound).
std::vector<std::string> expand_ranges(const std::string& list, const std::string& whole) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, comma - start);
    const std::size_t dash = item.find('-');
    const std::string lo = item.substr(0, dash), hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    auto digits = [](const std::string& s) {
      return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos && s.size() < 10;
    };
    if (!digits(lo) || !digits(hi) || std::stol(hi) < std::stol(lo))
      throw DistError(fmt::format("Slurm node list '{}': '{}' is not a number or a range a-b", whole, item));
    for (long v = std::stol(lo); v <= std::stol(hi); ++v) out.push_back(fmt::format("{:0{}}", v, lo.size()));
    start = comma + 1;
  }
  return out;
}

void expand_host(const std::string& host, const std::string& whole, std::vector<std::string>& out) {
  const std::size_t open = host.find('[');
  if (open == std::string::npos) {
    if (host.find(']') != std::string::npos)
      throw DistError(fmt::format("Slurm node list '{}': ']' without '['", whole));
    out.push_back(host);
    return;
  }
  const std::size_t close = host.find(']', open);
  if (close == std::string::npos) throw DistError(fmt::format("Slurm node list '{}': '[' without ']'", whole));
  const std::string prefix = host.substr(0, open), rest = host.substr(close + 1);
  for (const auto& v : expand_ranges(host.substr(open + 1, close - open - 1), whole))
    expand_host(prefix + v + rest, whole, out);
}

}  // namespace

const char* launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::kNone: return "none";
    case Launcher::kHybridscope: return "hybridscope launch";
    case Launcher::kTorchrun: return "torchrun";
    case Launcher::kMpirun: return "mpirun";
    case Launcher::kSlurm: return "srun";
    case Launcher::kEnvironment: return "RANK/WORLD_SIZE";
  }
  return "?";
}

std::string DistEnv::describe() const {
  return fmt::format("rank {} of {} (local rank {}, node {}) from {}; store at {}:{}{}", rank, world_size, local_rank,
                     node_rank, launcher_name(launcher), master_addr, master_port,
                     store_served_by_launcher ? " (torchrun's agent store)" : "");
}

std::vector<std::string> expand_slurm_nodelist(const std::string& list) {
  std::vector<std::string> hosts;
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c != ',' || depth > 0) continue;
    const std::string host = list.substr(start, i - start);
    if (host.empty()) throw DistError(fmt::format("Slurm node list '{}': an empty host name", list));
    expand_host(host, list, hosts);
    start = i + 1;
  }
  if (depth != 0) throw DistError(fmt::format("Slurm node list '{}': unbalanced brackets", list));
  return hosts;
}

DistEnv dist_env_from(const EnvLookup& lookup) {
  const Vars get(lookup);
  DistEnv env;
  const char* hs_launcher = get("HS_LAUNCHER");
  const bool hybridscope = hs_launcher && std::string_view(hs_launcher) == "hybridscope";
  const bool torchrun = get("TORCHELASTIC_RUN_ID") != nullptr;
  if (hybridscope || torchrun) {
    read_rank_variables(get, env);
    env.launcher = hybridscope ? Launcher::kHybridscope : Launcher::kTorchrun;
    env.node_rank = get.integer_or("GROUP_RANK", 0, 0);
    if (!hybridscope && truthy(get("TORCHELASTIC_USE_AGENT_STORE"))) {
      env.store_served_by_launcher = true;
      env.store_prefix = fmt::format("hs/{}/{}/", get("TORCHELASTIC_RUN_ID"),
                                     get.integer_or("TORCHELASTIC_RESTART_COUNT", 0, 0));
    }
    return env;
  }
  if (get("OMPI_COMM_WORLD_RANK") || get("OMPI_COMM_WORLD_SIZE")) {
    read_mpirun(get, env);
    return env;
  }
  if (get("SLURM_STEP_ID")) {
    read_slurm(get, env);
    return env;
  }
  if (get("RANK") || get("WORLD_SIZE")) {
    read_rank_variables(get, env);
    env.launcher = Launcher::kEnvironment;
    return env;
  }
  return env;
}

DistEnv dist_env_from_environment() {
  return dist_env_from([](const char* name) { return std::getenv(name); });
}

}  // namespace hs::trainer
