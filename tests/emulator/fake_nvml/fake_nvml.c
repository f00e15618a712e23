/*
 * A fake libnvidia-ml.so.1 for gpufleet.node's tests (test-only code; never installed on a real machine).
 *
 * It answers the NVML calls plugins/module_utils/nvml.py makes (its tuple FUNCTIONS) with the real ABI: names,
 * signatures, struct layouts, enum values and return codes as NVIDIA's nvml.h declares them, taken from
 * github.com/NVIDIA/go-nvml, gen/nvml/nvml.h at commit 075f45f ("NVML VERSION: 12.2.140", the 535 driver branch the
 * emulated profiles run) and checked against the same file at 2f9e261 (NVML 13.3.29), which adds
 * nvmlDeviceGetNumaNodeId (from 12.4) and the field ids NVML_FI_DEV_RESET_STATUS (226),
 * NVML_FI_DEV_DRAIN_AND_RESET_STATUS (227) and NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (230), and the health calls of
 * newer drivers: nvmlDeviceGetGpuFabricInfoV (nvmlGpuFabricInfo_v2_t/_v3_t, NVML_GPU_FABRIC_HEALTH_*),
 * nvmlDeviceGetRowRemapperHistogram, nvmlDeviceGetSramEccErrorStatus (nvmlEccSramErrorStatus_v1_t) and
 * nvmlDeviceGetRepairStatus (nvmlRepairStatus_v1_t); nvmlDeviceGetMemoryInfo_v2 (nvmlMemory_v2_t, from NVML 11.6)
 * and the power field ids NVML_FI_DEV_POWER_AVERAGE (185) and NVML_FI_DEV_POWER_INSTANT (186), from NVML 12.2,
 * which DCGM reads for DCGM_FI_DEV_FB_USED/_RESERVED and DCGM_FI_DEV_POWER_USAGE_INSTANT. The declarations below
 * are written from those facts; nvml.h itself is not included.
 *
 * What it answers comes from a flat file rendered by tests/emulator/emulator_profile.py from a hardware profile
 * and the planted faults, read at nvmlInit_v2: $GPUFLEET_NVML_CONF, else /etc/gpufleet-emulator/nvml.conf
 * (README.md beside this file describes the lines).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef enum nvmlEnableState_enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 } nvmlEnableState_t;
typedef enum nvmlComputeMode_enum {
    NVML_COMPUTEMODE_DEFAULT = 0, NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1, NVML_COMPUTEMODE_PROHIBITED = 2,
    NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3
} nvmlComputeMode_t;
typedef enum nvmlMemoryErrorType_enum {
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
} nvmlMemoryErrorType_t;
typedef enum nvmlEccCounterType_enum { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 } nvmlEccCounterType_t;
typedef enum nvmlMemoryLocation_enum {
    NVML_MEMORY_LOCATION_L1_CACHE = 0, NVML_MEMORY_LOCATION_L2_CACHE = 1, NVML_MEMORY_LOCATION_DRAM = 2,
    NVML_MEMORY_LOCATION_REGISTER_FILE = 3, NVML_MEMORY_LOCATION_TEXTURE_MEMORY = 4,
    NVML_MEMORY_LOCATION_TEXTURE_SHM = 5, NVML_MEMORY_LOCATION_CBU = 6, NVML_MEMORY_LOCATION_SRAM = 7
} nvmlMemoryLocation_t;
typedef enum nvmlPageRetirementCause_enum {
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
} nvmlPageRetirementCause_t;
typedef enum nvmlTemperatureSensors_enum { NVML_TEMPERATURE_GPU = 0, NVML_TEMPERATURE_COUNT } nvmlTemperatureSensors_t;
typedef enum nvmlGpuLevel_enum {
    NVML_TOPOLOGY_INTERNAL = 0, NVML_TOPOLOGY_SINGLE = 10, NVML_TOPOLOGY_MULTIPLE = 20, NVML_TOPOLOGY_HOSTBRIDGE = 30,
    NVML_TOPOLOGY_NODE = 40, NVML_TOPOLOGY_SYSTEM = 50
} nvmlGpuTopologyLevel_t;
typedef enum nvmlGpuP2PStatus_enum {
    NVML_P2P_STATUS_OK = 0, NVML_P2P_STATUS_CHIPSET_NOT_SUPPORED, NVML_P2P_STATUS_GPU_NOT_SUPPORTED,
    NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED, NVML_P2P_STATUS_DISABLED_BY_REGKEY, NVML_P2P_STATUS_NOT_SUPPORTED,
    NVML_P2P_STATUS_UNKNOWN
} nvmlGpuP2PStatus_t;
typedef enum nvmlGpuP2PCapsIndex_enum {
    NVML_P2P_CAPS_INDEX_READ = 0, NVML_P2P_CAPS_INDEX_WRITE, NVML_P2P_CAPS_INDEX_NVLINK, NVML_P2P_CAPS_INDEX_ATOMICS,
    NVML_P2P_CAPS_INDEX_PROP, NVML_P2P_CAPS_INDEX_UNKNOWN
} nvmlGpuP2PCapsIndex_t;
typedef enum nvmlNvLinkDeviceType_enum {
    NVML_NVLINK_DEVICE_TYPE_GPU = 0x00, NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01, NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
    NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF
} nvmlIntNvLinkDeviceType_t;
typedef enum nvmlValueType_enum {
    NVML_VALUE_TYPE_DOUBLE = 0, NVML_VALUE_TYPE_UNSIGNED_INT = 1, NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3, NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4, NVML_VALUE_TYPE_SIGNED_INT = 5
} nvmlValueType_t;
typedef unsigned int nvmlDeviceArchitecture_t;
typedef unsigned int nvmlAffinityScope_t;
typedef unsigned char nvmlGpuFabricState_t;

#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_NVLINK_MAX_LINKS 18
#define NVML_GPU_FABRIC_UUID_LEN 16
#define NVML_AFFINITY_SCOPE_NODE 0
#define NVML_AFFINITY_SCOPE_SOCKET 1
#define NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON 90
#define NVML_FI_DEV_PCIE_REPLAY_COUNTER 94
#define NVML_FI_DEV_REMAPPED_COR 142
#define NVML_FI_DEV_REMAPPED_UNC 143
#define NVML_FI_DEV_REMAPPED_PENDING 144
#define NVML_FI_DEV_REMAPPED_FAILURE 145
#define NVML_FI_DEV_NVLINK_GET_SPEED 164
#define NVML_FI_DEV_POWER_AVERAGE 185
#define NVML_FI_DEV_POWER_INSTANT 186
#define NVML_FI_DEV_RESET_STATUS 226
#define NVML_FI_DEV_DRAIN_AND_RESET_STATUS 227
#define NVML_FI_DEV_GET_GPU_RECOVERY_ACTION 230

typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

/* nvmlMemory_v2_t (nvmlDeviceGetMemoryInfo_v2, from NVML 11.6 of driver 510): used is the allocated memory without
 * reserved; nvmlMemory_t's used is the "Sum of Reserved and Allocated device memory". */
typedef struct nvmlMemory_v2_st {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

typedef struct nvmlDeviceAttributes_st {
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    unsigned int gpuInstanceSliceCount;
    unsigned int computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

typedef struct nvmlUtilization_st {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef union nvmlValue_st {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    nvmlValueType_t valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

typedef struct {
    char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t status;
    unsigned int partitionId;
    nvmlGpuFabricState_t state;
} nvmlGpuFabricInfo_t;

/* NVML_STRUCT_VERSION(data, ver): a versioned struct's size with the version in the top byte. */
#define NVML_STRUCT_VERSION(type, ver) ((unsigned int)(sizeof(type) | ((ver) << 24U)))

typedef struct {
    unsigned int version;
    unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t status;
    unsigned int cliqueId;
    nvmlGpuFabricState_t state;
    unsigned int healthMask;
} nvmlGpuFabricInfo_v2_t;

typedef struct {
    unsigned int version;
    unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t status;
    unsigned int cliqueId;
    nvmlGpuFabricState_t state;
    unsigned int healthMask;
    unsigned char healthSummary;
} nvmlGpuFabricInfo_v3_t;

typedef struct nvmlRowRemapperHistogramValues_st {
    unsigned int max;
    unsigned int high;
    unsigned int partial;
    unsigned int low;
    unsigned int none;
} nvmlRowRemapperHistogramValues_t;

typedef struct {
    unsigned int version;
    unsigned long long aggregateUncParity;
    unsigned long long aggregateUncSecDed;
    unsigned long long aggregateCor;
    unsigned long long volatileUncParity;
    unsigned long long volatileUncSecDed;
    unsigned long long volatileCor;
    unsigned long long aggregateUncBucketL2;
    unsigned long long aggregateUncBucketSm;
    unsigned long long aggregateUncBucketPcie;
    unsigned long long aggregateUncBucketMcu;
    unsigned long long aggregateUncBucketOther;
    unsigned int bThresholdExceeded;
} nvmlEccSramErrorStatus_v1_t;

typedef struct {
    unsigned int version;
    unsigned int bChannelRepairPending;
    unsigned int bTpcRepairPending;
} nvmlRepairStatus_v1_t;

/* ------------------------------------------------------------------------------------------ the emulated node */

#define MAX_GPUS 64
#define MAX_WORDS 16

struct link {
    int active;
    unsigned int remote_type;
    char remote_bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
    unsigned int remote_device_id;
};

struct nvmlDevice_st {
    int lost, hang;
    char name[96], uuid[96], serial[32], bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE], vbios[32];
    unsigned int pci_device_id, minor_number, module_id, architecture, compute_mode;
    int has_module_id, has_cc, cc_major, cc_minor, mig_max_devices;
    unsigned long long memory_total, memory_reserved, memory_used;
    int ecc_current, ecc_pending;
    int has_ecc[2][2][8];
    unsigned long long ecc[2][2][8];
    unsigned int retired[2];
    int has_retired_pending, retired_pending;
    int has_remapped;
    unsigned int remapped[4];
    unsigned int pcie[4], replay_counter;
    unsigned int power_limit_mw, power_usage_mw, power_average_mw, power_instant_mw;
    unsigned int temperature_c, util_gpu, util_memory, nvlink_speed_mbps;
    int has_power_average, has_power_instant;
    unsigned long long clocks_event_reasons;
    int has_architecture, has_compute_mode, has_replay, has_power_limit, has_power_usage, has_temperature;
    int has_clocks, has_utilization, has_retired;
    int has_fabric, fabric_status;
    unsigned int fabric_state;
    int has_reset_required, reset_required, has_drain, drain_and_reset;
    int has_recovery_action;
    unsigned int recovery_action;
    int has_fabric_health, fabric_health_version;
    unsigned int fabric_health_mask, fabric_health_summary;
    int has_histogram;
    unsigned int histogram[5];
    int has_sram_threshold, sram_threshold;
    int has_repair;
    unsigned int repair[2];
    int mig_current, mig_pending;
    int links;
    struct link link[NVML_NVLINK_MAX_LINKS];
    int has_ancestor[MAX_GPUS], ancestor[MAX_GPUS], p2p[MAX_GPUS][5];
    int cpu_words, memory_words, has_numa_node, numa_node_unimplemented;
    unsigned long cpu_affinity[MAX_WORDS], memory_affinity[MAX_WORDS];
    unsigned int numa_node;
};

static struct nvmlDevice_st devices[MAX_GPUS];
static unsigned int device_count;
static int init_count;
static int persistence_enabled;
static char driver_version[80], nvml_version[80];
static int cuda_driver_version;

static void hang_forever(void)
{
    struct timespec hour = {3600, 0};
    for (;;)
        nanosleep(&hour, NULL);
}

static void sleep_ms(long ms)
{
    struct timespec delay = {ms / 1000, (ms % 1000) * 1000000L};
    if (ms > 0)
        nanosleep(&delay, NULL);
}

static const char *config_path(void)
{
    const char *path = getenv("GPUFLEET_NVML_CONF");
    return path && *path ? path : "/etc/gpufleet-emulator/nvml.conf";
}

/* A file of the configuration directory (the conf's own directory): its first line, or "" when absent. */
static void config_file(const char *name, char *out, size_t size)
{
    char path[4096];
    const char *conf = config_path(), *slash = strrchr(conf, '/');
    FILE *file;
    out[0] = '\0';
    snprintf(path, sizeof(path), "%.*s/%s", slash ? (int)(slash - conf) : 1, slash ? conf : ".", name);
    file = fopen(path, "r");
    if (!file)
        return;
    if (!fgets(out, (int)size, file))
        out[0] = '\0';
    out[strcspn(out, "\r\n")] = '\0';
    fclose(file);
}

/* Whether an nvidia-persistenced runs without --no-persistence-mode (the daemon's default is on; of its two
 * options the last one given wins), as the nvidia-smi emulator decides it; /proc is $GPUFLEET_NVML_PROC in tests. */
static int daemon_keeps_persistence(void)
{
    const char *proc = getenv("GPUFLEET_NVML_PROC");
    DIR *dir;
    struct dirent *entry;
    int found = 0;
    if (!proc || !*proc)
        proc = "/proc";
    dir = opendir(proc);
    if (!dir)
        return 0;
    while (!found && (entry = readdir(dir)) != NULL) {
        char path[4096], argv[8192];
        size_t length, offset;
        FILE *file;
        int argument = 0, daemon_at = -1, enabled = 1;
        if (strspn(entry->d_name, "0123456789") != strlen(entry->d_name))
            continue;
        snprintf(path, sizeof(path), "%s/%s/cmdline", proc, entry->d_name);
        file = fopen(path, "rb");
        if (!file)
            continue;
        length = fread(argv, 1, sizeof(argv) - 1, file);
        fclose(file);
        argv[length] = '\0';
        for (offset = 0; offset < length; offset += strlen(argv + offset) + 1, argument++) {
            const char *word = argv + offset, *base = strrchr(word, '/');
            base = base ? base + 1 : word;
            if (daemon_at < 0 && argument <= 1 && strcmp(base, "nvidia-persistenced") == 0) {
                daemon_at = argument;
            } else if (daemon_at >= 0 && strcmp(word, "--persistence-mode") == 0) {
                enabled = 1;
            } else if (daemon_at >= 0 && strcmp(word, "--no-persistence-mode") == 0) {
                enabled = 0;
            }
        }
        found = daemon_at >= 0 && enabled;
    }
    closedir(dir);
    return found;
}

static int parse_words(const char *text, unsigned long *words, int *count)
{
    char copy[1024], *part, *save = NULL;
    *count = 0;
    snprintf(copy, sizeof(copy), "%s", text);
    for (part = strtok_r(copy, ",", &save); part; part = strtok_r(NULL, ",", &save)) {
        if (*count >= MAX_WORDS)
            return -1;
        words[(*count)++] = strtoul(part, NULL, 0);
    }
    return *count > 0 ? 0 : -1;
}

static int copy_text(char *out, size_t size, const char *value)
{
    if (strlen(value) >= size)
        return -1;
    strcpy(out, value);
    return 0;
}

/* One "key value" line into the node; 0 when understood. */
static int parse_line(const char *key, const char *value, struct nvmlDevice_st **gpu)
{
    struct nvmlDevice_st *d = *gpu;
    unsigned int a, b, c, e;
    unsigned long long count;
    int i, n = 0;
    if (strcmp(key, "profile") == 0)
        return 0;
    if (strcmp(key, "driver_version") == 0)
        return copy_text(driver_version, sizeof(driver_version), value);
    if (strcmp(key, "nvml_version") == 0)
        return copy_text(nvml_version, sizeof(nvml_version), value);
    if (strcmp(key, "cuda_driver_version") == 0)
        return sscanf(value, "%d%n", &cuda_driver_version, &n) == 1 && !value[n] ? 0 : -1;
    if (strcmp(key, "device_count") == 0)
        return sscanf(value, "%u", &device_count) == 1 && device_count <= MAX_GPUS ? 0 : -1;
    if (strcmp(key, "gpu") == 0) {
        if (sscanf(value, "%u", &a) != 1 || a >= device_count)
            return -1;
        *gpu = &devices[a];
        return 0;
    }
    if (!d)
        return -1;
    if (strcmp(key, "end") == 0) {
        *gpu = NULL;
        return 0;
    }
    if (strcmp(key, "lost") == 0)
        return sscanf(value, "%d", &d->lost) == 1 ? 0 : -1;
    if (strcmp(key, "name") == 0)
        return copy_text(d->name, sizeof(d->name), value);
    if (strcmp(key, "uuid") == 0)
        return copy_text(d->uuid, sizeof(d->uuid), value);
    if (strcmp(key, "serial") == 0)
        return copy_text(d->serial, sizeof(d->serial), value);
    if (strcmp(key, "pci_bus_id") == 0)
        return copy_text(d->bus_id, sizeof(d->bus_id), value);
    if (strcmp(key, "vbios_version") == 0)
        return copy_text(d->vbios, sizeof(d->vbios), value);
    if (strcmp(key, "pci_device_id") == 0)
        return sscanf(value, "%x", &d->pci_device_id) == 1 ? 0 : -1;
    if (strcmp(key, "minor_number") == 0)
        return sscanf(value, "%u", &d->minor_number) == 1 ? 0 : -1;
    if (strcmp(key, "module_id") == 0)
        return (d->has_module_id = sscanf(value, "%u", &d->module_id) == 1) ? 0 : -1;
    if (strcmp(key, "architecture") == 0)
        return (d->has_architecture = sscanf(value, "%u", &d->architecture) == 1) ? 0 : -1;
    if (strcmp(key, "compute_capability") == 0)
        return (d->has_cc = sscanf(value, "%d %d", &d->cc_major, &d->cc_minor) == 2) ? 0 : -1;
    if (strcmp(key, "memory") == 0)
        return sscanf(value, "%llu %llu %llu%n", &d->memory_total, &d->memory_reserved, &d->memory_used, &n) == 3
               && !value[n] && d->memory_reserved + d->memory_used <= d->memory_total ? 0 : -1;
    if (strcmp(key, "persistence_mode") == 0)
        return strcmp(value, "daemon") == 0 ? 0 : -1;
    if (strcmp(key, "ecc_mode") == 0)
        return sscanf(value, "%d %d", &d->ecc_current, &d->ecc_pending) == 2 ? 0 : -1;
    if (strcmp(key, "compute_mode") == 0)
        return (d->has_compute_mode = sscanf(value, "%u", &d->compute_mode) == 1) ? 0 : -1;
    if (strcmp(key, "mig_max_devices") == 0)
        return sscanf(value, "%d", &d->mig_max_devices) == 1 ? 0 : -1;
    if (strcmp(key, "ecc_counter") == 0) {
        if (sscanf(value, "%u %u %u %llu", &a, &b, &c, &count) != 4 || a > 1 || b > 1 || c > 7)
            return -1;
        d->has_ecc[a][b][c] = 1;
        d->ecc[a][b][c] = count;
        return 0;
    }
    if (strcmp(key, "retired_pages") == 0) {
        if (sscanf(value, "%u %u", &a, &b) != 2 || a > 1)
            return -1;
        d->retired[a] = b;
        d->has_retired = 1;
        return 0;
    }
    if (strcmp(key, "retired_pages_pending") == 0)
        return (d->has_retired_pending = sscanf(value, "%d", &d->retired_pending) == 1) ? 0 : -1;
    if (strcmp(key, "remapped_rows") == 0)
        return (d->has_remapped = sscanf(value, "%u %u %u %u", &d->remapped[0], &d->remapped[1], &d->remapped[2],
                                         &d->remapped[3]) == 4) ? 0 : -1;
    if (strcmp(key, "pcie") == 0)
        return sscanf(value, "%u %u %u %u", &d->pcie[0], &d->pcie[1], &d->pcie[2], &d->pcie[3]) == 4 ? 0 : -1;
    if (strcmp(key, "pcie_replay_counter") == 0)
        return (d->has_replay = sscanf(value, "%u", &d->replay_counter) == 1) ? 0 : -1;
    if (strcmp(key, "power_limit_mw") == 0)
        return (d->has_power_limit = sscanf(value, "%u", &d->power_limit_mw) == 1) ? 0 : -1;
    if (strcmp(key, "power_usage_mw") == 0)
        return (d->has_power_usage = sscanf(value, "%u", &d->power_usage_mw) == 1) ? 0 : -1;
    if (strcmp(key, "power_average_mw") == 0)
        return (d->has_power_average = sscanf(value, "%u", &d->power_average_mw) == 1) ? 0 : -1;
    if (strcmp(key, "power_instant_mw") == 0)
        return (d->has_power_instant = sscanf(value, "%u", &d->power_instant_mw) == 1) ? 0 : -1;
    if (strcmp(key, "temperature_c") == 0)
        return (d->has_temperature = sscanf(value, "%u", &d->temperature_c) == 1) ? 0 : -1;
    if (strcmp(key, "clocks_event_reasons") == 0)
        return (d->has_clocks = sscanf(value, "%llx", &d->clocks_event_reasons) == 1) ? 0 : -1;
    if (strcmp(key, "utilization") == 0)
        return (d->has_utilization = sscanf(value, "%u %u", &d->util_gpu, &d->util_memory) == 2) ? 0 : -1;
    if (strcmp(key, "nvlink_speed_mbps") == 0)
        return sscanf(value, "%u", &d->nvlink_speed_mbps) == 1 ? 0 : -1;
    if (strcmp(key, "fabric") == 0)
        return (d->has_fabric = sscanf(value, "%u %d", &d->fabric_state, &d->fabric_status) == 2) ? 0 : -1;
    if (strcmp(key, "reset_required") == 0)
        return (d->has_reset_required = sscanf(value, "%d", &d->reset_required) == 1) ? 0 : -1;
    if (strcmp(key, "drain_and_reset_recommended") == 0)
        return (d->has_drain = sscanf(value, "%d", &d->drain_and_reset) == 1) ? 0 : -1;
    if (strcmp(key, "recovery_action") == 0)
        return (d->has_recovery_action = sscanf(value, "%u", &d->recovery_action) == 1) ? 0 : -1;
    if (strcmp(key, "fabric_health") == 0)
        return (d->has_fabric_health = sscanf(value, "%x %u %d", &d->fabric_health_mask, &d->fabric_health_summary,
                                              &d->fabric_health_version) == 3
                && (d->fabric_health_version == 2 || d->fabric_health_version == 3)) ? 0 : -1;
    if (strcmp(key, "row_remapper_histogram") == 0)
        return (d->has_histogram = sscanf(value, "%u %u %u %u %u", &d->histogram[0], &d->histogram[1],
                                          &d->histogram[2], &d->histogram[3], &d->histogram[4]) == 5) ? 0 : -1;
    if (strcmp(key, "sram_threshold_exceeded") == 0)
        return (d->has_sram_threshold = sscanf(value, "%d", &d->sram_threshold) == 1) ? 0 : -1;
    if (strcmp(key, "repair_status") == 0)
        return (d->has_repair = sscanf(value, "%u %u", &d->repair[0], &d->repair[1]) == 2) ? 0 : -1;
    if (strcmp(key, "mig_mode") == 0)
        return sscanf(value, "%d %d", &d->mig_current, &d->mig_pending) == 2 ? 0 : -1;
    if (strcmp(key, "link") == 0) {
        char bus[64];
        if (sscanf(value, "%u %u %u %63s %x", &a, &b, &c, bus, &e) != 5 || a != (unsigned int)d->links
            || a >= NVML_NVLINK_MAX_LINKS || copy_text(d->link[a].remote_bus_id, sizeof(d->link[a].remote_bus_id), bus))
            return -1;
        d->link[a].active = (int)b;
        d->link[a].remote_type = c;
        d->link[a].remote_device_id = e;
        d->links++;
        return 0;
    }
    if (strcmp(key, "ancestor") == 0) {
        if (sscanf(value, "%u %u", &a, &b) != 2 || a >= device_count)
            return -1;
        d->has_ancestor[a] = 1;
        d->ancestor[a] = (int)b;
        return 0;
    }
    if (strcmp(key, "p2p") == 0) {
        int s[5];
        if (sscanf(value, "%u %d %d %d %d %d", &a, &s[0], &s[1], &s[2], &s[3], &s[4]) != 6 || a >= device_count)
            return -1;
        for (i = 0; i < 5; i++)
            d->p2p[a][i] = s[i];
        return 0;
    }
    if (strcmp(key, "cpu_affinity") == 0)
        return parse_words(value, d->cpu_affinity, &d->cpu_words);
    if (strcmp(key, "memory_affinity") == 0)
        return parse_words(value, d->memory_affinity, &d->memory_words);
    if (strcmp(key, "numa_node") == 0 && strcmp(value, "unimplemented") == 0) {
        d->numa_node_unimplemented = 1;
        return 0;
    }
    if (strcmp(key, "numa_node") == 0)
        return (d->has_numa_node = sscanf(value, "%u", &d->numa_node) == 1) ? 0 : -1;
    return -1;
}

/* Reads the configuration; returns what nvmlInit_v2 answers. */
static nvmlReturn_t load_config(void)
{
    char line[1024], delay[64];
    const char *path = config_path();
    struct nvmlDevice_st *gpu = NULL;
    FILE *file = fopen(path, "r");
    int number = 0, init = -1, hang = 0;
    memset(devices, 0, sizeof(devices));
    device_count = 0;
    driver_version[0] = nvml_version[0] = '\0';
    cuda_driver_version = 0;
    if (!file) {
        fprintf(stderr, "fake libnvidia-ml: cannot read %s: no emulated driver\n", path);
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    while (fgets(line, sizeof(line), file)) {
        char *key = line, *value;
        int result;
        number++;
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || line[0] == '#')
            continue;
        value = strchr(line, ' ');
        if (value)
            *value++ = '\0';
        else
            value = line + strlen(line);
        if (gpu && strcmp(key, "hang") == 0) {
            result = sscanf(value, "%d", &gpu->hang) == 1 ? 0 : -1;
        } else if (strcmp(key, "hang") == 0) {
            result = sscanf(value, "%d", &hang) == 1 ? 0 : -1;
        } else if (strcmp(key, "init") == 0) {
            result = sscanf(value, "%d", &init) == 1 ? 0 : -1;
        } else {
            result = parse_line(key, value, &gpu);
        }
        if (result != 0) {
            fprintf(stderr, "fake libnvidia-ml: %s line %d: cannot read \"%s %s\"\n", path, number, key, value);
            fclose(file);
            return NVML_ERROR_UNKNOWN;
        }
    }
    fclose(file);
    if (hang)
        hang_forever();
    config_file("delay_ms", delay, sizeof(delay));
    if (getenv("GPUFLEET_EMULATOR_DELAY_MS"))
        snprintf(delay, sizeof(delay), "%s", getenv("GPUFLEET_EMULATOR_DELAY_MS"));
    sleep_ms(atol(delay));
    if (init < 0) {
        fprintf(stderr, "fake libnvidia-ml: %s has no init line\n", path);
        return NVML_ERROR_UNKNOWN;
    }
    config_file("persistence", delay, sizeof(delay));
    persistence_enabled = delay[0] != '\0' || daemon_keeps_persistence();
    return (nvmlReturn_t)init;
}

/* ------------------------------------------------------------------------------------------------ helpers */

#define CHECK_INIT() do { if (init_count <= 0) return NVML_ERROR_UNINITIALIZED; } while (0)

/* The device behind a handle: UNINITIALIZED before init, INVALID_ARGUMENT for a handle that is not one of ours,
 * GPU_IS_LOST for a lost GPU; a hung GPU blocks. */
static nvmlReturn_t lookup(struct nvmlDevice_st *handle, struct nvmlDevice_st **out)
{
    size_t offset;
    CHECK_INIT();
    if (!handle || (char *)handle < (char *)devices)
        return NVML_ERROR_INVALID_ARGUMENT;
    offset = (size_t)((char *)handle - (char *)devices);
    if (offset % sizeof(devices[0]) != 0 || offset / sizeof(devices[0]) >= device_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (handle->lost)
        return NVML_ERROR_GPU_IS_LOST;
    if (handle->hang)
        hang_forever();
    *out = handle;
    return NVML_SUCCESS;
}

#define DEVICE(handle, d) \
    struct nvmlDevice_st *d = NULL; \
    do { nvmlReturn_t found_ = lookup((handle), &d); if (found_ != NVML_SUCCESS) return found_; } while (0)

static nvmlReturn_t put_text(char *out, unsigned int length, const char *value)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(value) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(out, value);
    return NVML_SUCCESS;
}

static void fill_pci(nvmlPciInfo_t *pci, const char *bus_id, unsigned int device_id)
{
    unsigned int domain = 0, bus = 0, slot = 0, function = 0;
    memset(pci, 0, sizeof(*pci));
    sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &slot, &function);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = slot;
    pci->pciDeviceId = device_id;
    snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0", domain, bus, slot);
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0", domain & 0xffff, bus, slot);
}

/* ------------------------------------------------------------------------------------------------ system */

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    nvmlReturn_t result;
    if (init_count > 0) {
        init_count++;
        return NVML_SUCCESS;
    }
    result = load_config();
    if (result == NVML_SUCCESS)
        init_count = 1;
    return result;
}

EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return nvmlInit_v2(); }

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    CHECK_INIT();
    init_count--;
    return NVML_SUCCESS;
}

/* The texts of pynvml's table (github.com/NVIDIA's nvidia-ml-py, pynvml.py, NVMLError._errcode_to_string). */
EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_NOT_READY: return "Not Ready";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    CHECK_INIT();
    return put_text(version, length, driver_version);
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    CHECK_INIT();
    return put_text(version, length, nvml_version);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    CHECK_INIT();
    if (!cudaDriverVersion)
        return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = cuda_driver_version;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    return nvmlSystemGetCudaDriverVersion_v2(cudaDriverVersion);
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    CHECK_INIT();
    if (!deviceCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = device_count;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) { return nvmlDeviceGetCount_v2(deviceCount); }

/* A lost GPU still counts; its handle comes with NVML_ERROR_GPU_IS_LOST, and every call on it answers the same. */
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, struct nvmlDevice_st **device)
{
    CHECK_INIT();
    if (!device || index >= device_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return devices[index].lost ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, struct nvmlDevice_st **device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

/* ------------------------------------------------------------------------------------------------ identity */

EXPORT nvmlReturn_t nvmlDeviceGetName(struct nvmlDevice_st *device, char *name, unsigned int length)
{
    DEVICE(device, d);
    return put_text(name, length, d->name);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(struct nvmlDevice_st *device, char *uuid, unsigned int length)
{
    DEVICE(device, d);
    return put_text(uuid, length, d->uuid);
}

EXPORT nvmlReturn_t nvmlDeviceGetSerial(struct nvmlDevice_st *device, char *serial, unsigned int length)
{
    DEVICE(device, d);
    return put_text(serial, length, d->serial);
}

EXPORT nvmlReturn_t nvmlDeviceGetVbiosVersion(struct nvmlDevice_st *device, char *version, unsigned int length)
{
    DEVICE(device, d);
    return put_text(version, length, d->vbios);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(struct nvmlDevice_st *device, nvmlPciInfo_t *pci)
{
    DEVICE(device, d);
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    fill_pci(pci, d->bus_id, d->pci_device_id);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(struct nvmlDevice_st *device, unsigned int *minorNumber)
{
    DEVICE(device, d);
    if (!minorNumber)
        return NVML_ERROR_INVALID_ARGUMENT;
    *minorNumber = d->minor_number;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetModuleId(struct nvmlDevice_st *device, unsigned int *moduleId)
{
    DEVICE(device, d);
    if (!moduleId)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_module_id)
        return NVML_ERROR_NOT_SUPPORTED;
    *moduleId = d->module_id;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(struct nvmlDevice_st *device, nvmlDeviceArchitecture_t *arch)
{
    DEVICE(device, d);
    if (!arch)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_architecture)
        return NVML_ERROR_NOT_SUPPORTED;
    *arch = d->architecture;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(struct nvmlDevice_st *device, int *major, int *minor)
{
    DEVICE(device, d);
    if (!major || !minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_cc)
        return NVML_ERROR_NOT_SUPPORTED;
    *major = d->cc_major;
    *minor = d->cc_minor;
    return NVML_SUCCESS;
}

/* The driver branch of the profile (driver_version's major), 0 when unknown. */
static int driver_branch(void)
{
    return atoi(driver_version);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(struct nvmlDevice_st *device, nvmlMemory_t *memory)
{
    DEVICE(device, d);
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = d->memory_total;
    memory->used = d->memory_reserved + d->memory_used;
    memory->free = d->memory_total - memory->used;
    return NVML_SUCCESS;
}

/* From driver 510 (NVML 11.6, the first nvml.h with it; DCGM calls it from 510): a library before has no such
 * symbol, which the one fake library answers with NVML_ERROR_FUNCTION_NOT_FOUND. */
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(struct nvmlDevice_st *device, nvmlMemory_v2_t *memory)
{
    DEVICE(device, d);
    if (driver_branch() < 510)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != NVML_STRUCT_VERSION(nvmlMemory_v2_t, 2))
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory->total = d->memory_total;
    memory->reserved = d->memory_reserved;
    memory->used = d->memory_used;
    memory->free = d->memory_total - d->memory_reserved - d->memory_used;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------ modes */

EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(struct nvmlDevice_st *device, nvmlEnableState_t *mode)
{
    DEVICE(device, d);
    (void)d;
    if (!mode)
        return NVML_ERROR_INVALID_ARGUMENT;
    *mode = persistence_enabled ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(struct nvmlDevice_st *device, nvmlComputeMode_t *mode)
{
    DEVICE(device, d);
    if (!mode)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_compute_mode)
        return NVML_ERROR_NOT_SUPPORTED;
    *mode = (nvmlComputeMode_t)d->compute_mode;
    return NVML_SUCCESS;
}

/* MIG is off unless the conf says "mig_mode 1 1" (a planted MIG GPU; it has no MIG device handles). */
EXPORT nvmlReturn_t nvmlDeviceGetMigMode(struct nvmlDevice_st *device, unsigned int *currentMode,
                                         unsigned int *pendingMode)
{
    DEVICE(device, d);
    if (!currentMode || !pendingMode)
        return NVML_ERROR_INVALID_ARGUMENT;
    *currentMode = d->mig_current ? 1 : 0;
    *pendingMode = d->mig_pending ? 1 : 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(struct nvmlDevice_st *device, unsigned int *count)
{
    DEVICE(device, d);
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (d->mig_max_devices < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *count = (unsigned int)d->mig_max_devices;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(struct nvmlDevice_st *device, unsigned int index,
                                                        struct nvmlDevice_st **migDevice)
{
    DEVICE(device, d);
    if (!migDevice)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (d->mig_max_devices < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (index >= (unsigned int)d->mig_max_devices)
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_ERROR_NOT_FOUND;            /* MIG disabled: no MIG device at any index */
}

/* Only MIG device handles have instance ids; every handle here is a whole GPU's. */
EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(struct nvmlDevice_st *device, unsigned int *id)
{
    DEVICE(device, d);
    (void)d;
    return id ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(struct nvmlDevice_st *device, unsigned int *id)
{
    DEVICE(device, d);
    (void)d;
    return id ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
}

/* nvml.h: "This API currently only supports MIG device handles"; every handle here is a whole GPU's. */
EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(struct nvmlDevice_st *device, nvmlDeviceAttributes_t *attributes)
{
    DEVICE(device, d);
    (void)d;
    return attributes ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
}

/* ------------------------------------------------------------------------------------------------ ECC, pages, rows */

EXPORT nvmlReturn_t nvmlDeviceGetEccMode(struct nvmlDevice_st *device, nvmlEnableState_t *current,
                                         nvmlEnableState_t *pending)
{
    DEVICE(device, d);
    if (!current || !pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    *current = d->ecc_current ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    *pending = d->ecc_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(struct nvmlDevice_st *device, nvmlMemoryErrorType_t errorType,
                                                    nvmlEccCounterType_t counterType,
                                                    nvmlMemoryLocation_t locationType, unsigned long long *count)
{
    DEVICE(device, d);
    if (!count || (unsigned int)errorType > 1 || (unsigned int)counterType > 1 || (unsigned int)locationType > 7)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->ecc_current || !d->has_ecc[errorType][counterType][locationType])
        return NVML_ERROR_NOT_SUPPORTED;
    *count = d->ecc[errorType][counterType][locationType];
    return NVML_SUCCESS;
}

/* The total over every location the GPU counts (here DRAM and SRAM). */
EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(struct nvmlDevice_st *device, nvmlMemoryErrorType_t errorType,
                                                nvmlEccCounterType_t counterType, unsigned long long *eccCounts)
{
    unsigned long long total = 0;
    int location, any = 0;
    DEVICE(device, d);
    if (!eccCounts || (unsigned int)errorType > 1 || (unsigned int)counterType > 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (location = 0; location < 8; location++) {
        if (d->has_ecc[errorType][counterType][location]) {
            total += d->ecc[errorType][counterType][location];
            any = 1;
        }
    }
    if (!d->ecc_current || !any)
        return NVML_ERROR_NOT_SUPPORTED;
    *eccCounts = total;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(struct nvmlDevice_st *device, nvmlPageRetirementCause_t cause,
                                              unsigned int *pageCount, unsigned long long *addresses)
{
    unsigned int page, count;
    DEVICE(device, d);
    if (!pageCount || (unsigned int)cause > 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_retired)
        return NVML_ERROR_NOT_SUPPORTED;
    count = d->retired[cause];
    if (*pageCount < count) {
        *pageCount = count;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (count > 0 && !addresses)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (page = 0; page < count; page++)
        addresses[page] = 0x100000ULL * (cause + 1) + 0x1000ULL * page;
    *pageCount = count;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(struct nvmlDevice_st *device, nvmlEnableState_t *isPending)
{
    DEVICE(device, d);
    if (!isPending)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_retired_pending)
        return NVML_ERROR_NOT_SUPPORTED;
    *isPending = d->retired_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(struct nvmlDevice_st *device, unsigned int *corrRows,
                                              unsigned int *uncRows, unsigned int *isPending,
                                              unsigned int *failureOccurred)
{
    DEVICE(device, d);
    if (!corrRows || !uncRows || !isPending || !failureOccurred)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* nvml.h: "NVML_ERROR_NOT_SUPPORTED If MIG is enabled" (the 31-a100 MIG capture prints remapped_rows N/A) */
    if (!d->has_remapped || d->mig_current)
        return NVML_ERROR_NOT_SUPPORTED;
    *corrRows = d->remapped[0];
    *uncRows = d->remapped[1];
    *isPending = d->remapped[2];
    *failureOccurred = d->remapped[3];
    return NVML_SUCCESS;
}

/* The histogram under MIG: nvml.h does not say; answered as the remapped rows are (NOT_SUPPORTED). */
EXPORT nvmlReturn_t nvmlDeviceGetRowRemapperHistogram(struct nvmlDevice_st *device,
                                                      nvmlRowRemapperHistogramValues_t *values)
{
    DEVICE(device, d);
    if (!values)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_histogram || d->mig_current)
        return NVML_ERROR_NOT_SUPPORTED;
    values->max = d->histogram[0];
    values->high = d->histogram[1];
    values->partial = d->histogram[2];
    values->low = d->histogram[3];
    values->none = d->histogram[4];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetSramEccErrorStatus(struct nvmlDevice_st *device, nvmlEccSramErrorStatus_v1_t *status)
{
    unsigned int version;
    DEVICE(device, d);
    if (!status)
        return NVML_ERROR_INVALID_ARGUMENT;
    version = status->version;
    if (version != NVML_STRUCT_VERSION(nvmlEccSramErrorStatus_v1_t, 1))
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!d->has_sram_threshold)
        return NVML_ERROR_NOT_SUPPORTED;
    memset(status, 0, sizeof(*status));
    status->version = version;
    status->aggregateUncParity = d->ecc[1][1][7];   /* the aggregate SRAM uncorrectable count of the conf */
    status->volatileUncParity = d->ecc[1][0][7];
    status->bThresholdExceeded = d->sram_threshold ? 1 : 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRepairStatus(struct nvmlDevice_st *device, nvmlRepairStatus_v1_t *repairStatus)
{
    unsigned int version;
    DEVICE(device, d);
    if (!repairStatus)
        return NVML_ERROR_INVALID_ARGUMENT;
    version = repairStatus->version;
    if (version != NVML_STRUCT_VERSION(nvmlRepairStatus_v1_t, 1))
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!d->has_repair)
        return NVML_ERROR_NOT_SUPPORTED;
    repairStatus->bChannelRepairPending = d->repair[0] ? 1 : 0;
    repairStatus->bTpcRepairPending = d->repair[1] ? 1 : 0;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------ PCIe */

static nvmlReturn_t pcie_value(struct nvmlDevice_st *device, int which, unsigned int *out)
{
    DEVICE(device, d);
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (which == 4 && !d->has_replay)
        return NVML_ERROR_NOT_SUPPORTED;
    *out = which < 4 ? d->pcie[which] : d->replay_counter;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(struct nvmlDevice_st *device, unsigned int *currLinkGen)
{
    return pcie_value(device, 0, currLinkGen);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(struct nvmlDevice_st *device, unsigned int *maxLinkGen)
{
    return pcie_value(device, 1, maxLinkGen);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(struct nvmlDevice_st *device, unsigned int *currLinkWidth)
{
    return pcie_value(device, 2, currLinkWidth);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(struct nvmlDevice_st *device, unsigned int *maxLinkWidth)
{
    return pcie_value(device, 3, maxLinkWidth);
}

EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(struct nvmlDevice_st *device, unsigned int *value)
{
    return pcie_value(device, 4, value);
}

/* ------------------------------------------------------------------------------------------------ power, heat, clocks */

EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(struct nvmlDevice_st *device, unsigned int *limit)
{
    DEVICE(device, d);
    if (!limit)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_power_limit)
        return NVML_ERROR_NOT_SUPPORTED;
    *limit = d->power_limit_mw;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(struct nvmlDevice_st *device, unsigned int *power)
{
    DEVICE(device, d);
    if (!power)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_power_usage)
        return NVML_ERROR_NOT_SUPPORTED;
    *power = d->power_usage_mw;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(struct nvmlDevice_st *device, nvmlTemperatureSensors_t sensorType,
                                             unsigned int *temp)
{
    DEVICE(device, d);
    if (!temp || (unsigned int)sensorType >= NVML_TEMPERATURE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_temperature)
        return NVML_ERROR_NOT_SUPPORTED;
    *temp = d->temperature_c;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(struct nvmlDevice_st *device,
                                                           unsigned long long *clocksEventReasons)
{
    DEVICE(device, d);
    if (!clocksEventReasons)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_clocks)
        return NVML_ERROR_NOT_SUPPORTED;
    *clocksEventReasons = d->clocks_event_reasons;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(struct nvmlDevice_st *device,
                                                              unsigned long long *clocksThrottleReasons)
{
    return nvmlDeviceGetCurrentClocksEventReasons(device, clocksThrottleReasons);
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(struct nvmlDevice_st *device, nvmlUtilization_t *utilization)
{
    DEVICE(device, d);
    if (!utilization)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_utilization)
        return NVML_ERROR_NOT_SUPPORTED;
    utilization->gpu = d->util_gpu;
    utilization->memory = d->util_memory;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------ NVLink */

/* A GPU without NVLink answers NOT_SUPPORTED for every link index below NVML_NVLINK_MAX_LINKS, as does a GPU with
 * NVLink for the indices past its own links; an index past the maximum is an invalid argument. */
static nvmlReturn_t nvlink(struct nvmlDevice_st *device, unsigned int link, struct link **out)
{
    DEVICE(device, d);
    if (link >= NVML_NVLINK_MAX_LINKS)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (link >= (unsigned int)d->links)
        return NVML_ERROR_NOT_SUPPORTED;
    *out = &d->link[link];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(struct nvmlDevice_st *device, unsigned int link,
                                             nvmlEnableState_t *isActive)
{
    struct link *l = NULL;
    nvmlReturn_t result = nvlink(device, link, &l);
    if (result != NVML_SUCCESS)
        return result;
    if (!isActive)
        return NVML_ERROR_INVALID_ARGUMENT;
    *isActive = l->active ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

/* The remote end of an inactive link is not known: NOT_SUPPORTED. */
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(struct nvmlDevice_st *device, unsigned int link,
                                                        nvmlPciInfo_t *pci)
{
    struct link *l = NULL;
    nvmlReturn_t result = nvlink(device, link, &l);
    if (result != NVML_SUCCESS)
        return result;
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!l->active)
        return NVML_ERROR_NOT_SUPPORTED;
    fill_pci(pci, l->remote_bus_id, l->remote_device_id);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(struct nvmlDevice_st *device, unsigned int link,
                                                        nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType)
{
    struct link *l = NULL;
    nvmlReturn_t result = nvlink(device, link, &l);
    if (result != NVML_SUCCESS)
        return result;
    if (!pNvLinkDeviceType)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!l->active)
        return NVML_ERROR_NOT_SUPPORTED;
    *pNvLinkDeviceType = (nvmlIntNvLinkDeviceType_t)l->remote_type;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------ topology */

static nvmlReturn_t pair(struct nvmlDevice_st *device1, struct nvmlDevice_st *device2, struct nvmlDevice_st **first,
                         unsigned int *second)
{
    struct nvmlDevice_st *other = NULL;
    nvmlReturn_t result = lookup(device1, first);
    if (result != NVML_SUCCESS)
        return result;
    result = lookup(device2, &other);
    if (result != NVML_SUCCESS)
        return result;
    if (other == *first)
        return NVML_ERROR_INVALID_ARGUMENT;
    *second = (unsigned int)(other - devices);
    return (*first)->has_ancestor[*second] ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(struct nvmlDevice_st *device1, struct nvmlDevice_st *device2,
                                                        nvmlGpuTopologyLevel_t *pathInfo)
{
    struct nvmlDevice_st *first = NULL;
    unsigned int second = 0;
    nvmlReturn_t result = pair(device1, device2, &first, &second);
    if (result != NVML_SUCCESS)
        return result;
    if (!pathInfo)
        return NVML_ERROR_INVALID_ARGUMENT;
    *pathInfo = (nvmlGpuTopologyLevel_t)first->ancestor[second];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(struct nvmlDevice_st *device1, struct nvmlDevice_st *device2,
                                           nvmlGpuP2PCapsIndex_t p2pIndex, nvmlGpuP2PStatus_t *p2pStatus)
{
    struct nvmlDevice_st *first = NULL;
    unsigned int second = 0;
    nvmlReturn_t result = pair(device1, device2, &first, &second);
    if (result != NVML_SUCCESS)
        return result;
    if (!p2pStatus || (unsigned int)p2pIndex >= NVML_P2P_CAPS_INDEX_UNKNOWN)
        return NVML_ERROR_INVALID_ARGUMENT;
    *p2pStatus = (nvmlGpuP2PStatus_t)first->p2p[second][p2pIndex];
    return NVML_SUCCESS;
}

static nvmlReturn_t fill_words(unsigned int size, unsigned long *set, const unsigned long *words, int count)
{
    unsigned int word;
    if (size == 0 || !set)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (count == 0)
        return NVML_ERROR_NOT_SUPPORTED;
    for (word = 0; word < size; word++)
        set[word] = word < (unsigned int)count ? words[word] : 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinity(struct nvmlDevice_st *device, unsigned int cpuSetSize,
                                             unsigned long *cpuSet)
{
    DEVICE(device, d);
    return fill_words(cpuSetSize, cpuSet, d->cpu_affinity, d->cpu_words);
}

/* Every emulated NUMA node is one socket: both scopes give the same set. */
EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(struct nvmlDevice_st *device, unsigned int cpuSetSize,
                                                        unsigned long *cpuSet, nvmlAffinityScope_t scope)
{
    DEVICE(device, d);
    if (scope > NVML_AFFINITY_SCOPE_SOCKET)
        return NVML_ERROR_INVALID_ARGUMENT;
    return fill_words(cpuSetSize, cpuSet, d->cpu_affinity, d->cpu_words);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryAffinity(struct nvmlDevice_st *device, unsigned int nodeSetSize,
                                                unsigned long *nodeSet, nvmlAffinityScope_t scope)
{
    DEVICE(device, d);
    if (scope > NVML_AFFINITY_SCOPE_SOCKET)
        return NVML_ERROR_INVALID_ARGUMENT;
    return fill_words(nodeSetSize, nodeSet, d->memory_affinity, d->memory_words);
}

/* The GPU's own NUMA node (topo -m's "GPU NUMA ID"), only where GPUs are NUMA nodes (GH200 and the like). Where
 * the profile's capture comes from a driver without that column, FUNCTION_NOT_FOUND: that NVML lacks the call. */
EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(struct nvmlDevice_st *device, unsigned int *node)
{
    DEVICE(device, d);
    if (d->numa_node_unimplemented)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    if (!node)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_numa_node)
        return NVML_ERROR_NOT_SUPPORTED;
    *node = d->numa_node;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------ fabric, fields */

EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfo(struct nvmlDevice_st *device, nvmlGpuFabricInfo_t *gpuFabricInfo)
{
    DEVICE(device, d);
    if (!gpuFabricInfo)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_fabric)
        return NVML_ERROR_NOT_SUPPORTED;
    memset(gpuFabricInfo, 0, sizeof(*gpuFabricInfo));
    if (d->fabric_state == 3)
        memcpy(gpuFabricInfo->clusterUuid, "gpufleet-fabric0", NVML_GPU_FABRIC_UUID_LEN);
    gpuFabricInfo->status = (nvmlReturn_t)d->fabric_status;
    gpuFabricInfo->state = (nvmlGpuFabricState_t)d->fabric_state;
    return NVML_SUCCESS;
}

/* The versioned call of newer drivers. Without "fabric_health" in the conf the library is one of the 535 branch,
   which has no such call (NVML_ERROR_FUNCTION_NOT_FOUND); "fabric_health MASK SUMMARY 2" one that knows only
   nvmlGpuFabricInfo_v2 (a v3 request: NVML_ERROR_ARGUMENT_VERSION_MISMATCH). */
EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(struct nvmlDevice_st *device, nvmlGpuFabricInfo_v3_t *gpuFabricInfo)
{
    unsigned int version;
    DEVICE(device, d);
    if (!gpuFabricInfo)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->has_fabric_health)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    version = gpuFabricInfo->version;
    if (version == NVML_STRUCT_VERSION(nvmlGpuFabricInfo_v3_t, 3) && d->fabric_health_version == 3)
        memset(gpuFabricInfo, 0, sizeof(nvmlGpuFabricInfo_v3_t));
    else if (version == NVML_STRUCT_VERSION(nvmlGpuFabricInfo_v2_t, 2))
        memset(gpuFabricInfo, 0, sizeof(nvmlGpuFabricInfo_v2_t));
    else
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!d->has_fabric)
        return NVML_ERROR_NOT_SUPPORTED;
    gpuFabricInfo->version = version;
    if (d->fabric_state == 3)
        memcpy(gpuFabricInfo->clusterUuid, "gpufleet-fabric0", NVML_GPU_FABRIC_UUID_LEN);
    gpuFabricInfo->status = (nvmlReturn_t)d->fabric_status;
    gpuFabricInfo->state = (nvmlGpuFabricState_t)d->fabric_state;
    gpuFabricInfo->healthMask = d->fabric_health_mask;
    if (version == NVML_STRUCT_VERSION(nvmlGpuFabricInfo_v3_t, 3))
        gpuFabricInfo->healthSummary = (unsigned char)d->fabric_health_summary;
    return NVML_SUCCESS;
}

static void field_value(struct nvmlDevice_st *d, nvmlFieldValue_t *field)
{
    int known = 1;
    field->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
    field->value.ullVal = 0;
    switch (field->fieldId) {
    case NVML_FI_DEV_PCIE_REPLAY_COUNTER:
        known = d->has_replay;
        field->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
        field->value.ullVal = d->replay_counter;
        break;
    case NVML_FI_DEV_REMAPPED_COR:
    case NVML_FI_DEV_REMAPPED_UNC:
    case NVML_FI_DEV_REMAPPED_PENDING:
    case NVML_FI_DEV_REMAPPED_FAILURE:
        known = d->has_remapped && !d->mig_current;     /* as nvmlDeviceGetRemappedRows under MIG */
        field->value.uiVal = d->remapped[field->fieldId - NVML_FI_DEV_REMAPPED_COR];
        break;
    /* A driver that reports the recovery action (570+) has deprecated the two reset fields: NOT_SUPPORTED. */
    case NVML_FI_DEV_RESET_STATUS:
        known = d->has_reset_required && !d->has_recovery_action;
        field->value.uiVal = (unsigned int)d->reset_required;
        break;
    case NVML_FI_DEV_DRAIN_AND_RESET_STATUS:
        known = d->has_drain && !d->has_recovery_action;
        field->value.uiVal = (unsigned int)d->drain_and_reset;
        break;
    case NVML_FI_DEV_GET_GPU_RECOVERY_ACTION:   /* only where the profile gives one (570 capture); 535: NOT_SUPPORTED */
        known = d->has_recovery_action;
        field->value.uiVal = d->recovery_action;
        break;
    /* Power in mW, scope 0 the GPU (1, the module with a Grace CPU, is not emulated); field ids from nvml.h of NVML
     * 12.2 (driver 535): an older driver does not know them. The average only on GPUs that have one (the profile). */
    case NVML_FI_DEV_POWER_AVERAGE:
        known = d->has_power_average && field->scopeId == 0 && driver_branch() >= 535;
        field->value.uiVal = d->power_average_mw;
        break;
    case NVML_FI_DEV_POWER_INSTANT:
        known = d->has_power_instant && field->scopeId == 0 && driver_branch() >= 535;
        field->value.uiVal = d->power_instant_mw;
        break;
    case NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON:
        known = d->links > 0 && d->nvlink_speed_mbps > 0;
        field->value.uiVal = d->nvlink_speed_mbps;
        break;
    case NVML_FI_DEV_NVLINK_GET_SPEED:        /* scopeId: the link */
        known = field->scopeId < (unsigned int)d->links && d->link[field->scopeId].active && d->nvlink_speed_mbps > 0;
        field->value.uiVal = d->nvlink_speed_mbps;
        break;
    default:
        known = 0;
    }
    if (!known)
        field->value.ullVal = 0;
    field->nvmlReturn = known ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(struct nvmlDevice_st *device, int valuesCount, nvmlFieldValue_t *values)
{
    struct timeval now;
    int index;
    DEVICE(device, d);
    if (valuesCount <= 0 || !values)
        return NVML_ERROR_INVALID_ARGUMENT;
    gettimeofday(&now, NULL);
    for (index = 0; index < valuesCount; index++) {
        values[index].timestamp = (long long)now.tv_sec * 1000000LL + now.tv_usec;
        values[index].latencyUsec = 0;
        field_value(d, &values[index]);
    }
    return NVML_SUCCESS;
}
