/* Built-in topologies: those of the common GPU servers, for nodes that carry
 * no troupe.io/gpu-topology annotation but do carry the labels GPU Feature
 * Discovery writes: nvidia.com/gpu.product (e.g. "NVIDIA-A100-SXM4-80GB") and
 * nvidia.com/gpu.count; and the unknown topology, where nothing is known.
 *
 * A profile is a table row: the words the product label must contain, the
 * exact device count, and the matrix (one level for every pair on the switched
 * baseboards, an explicit matrix for the DGX-1 cube mesh). Words are matched
 * without regard to case and only at the start of a word, so "H200" does not
 * match "GH200". Labels naming a PCIe or NVL card, or a MIG slice (GFD appends
 * "-MIG-1g.10gb" and counts slices, not boards), match no profile: their
 * links depend on where the cards sit and which bridges join them, which only
 * the annotation can say.
 *
 * NUMA nodes are what the chooser needs to tell the two CPU sockets apart; the
 * numbers the kernel gives them depend on the BIOS (an AMD board in NPS4 mode
 * splits each socket in four), so a profile uses 0 and 1 for the sockets, and
 * -1 where the boards in use differ.
 *
 * Thread: any; the table is constant.
 */
#include "placement/topology.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum {
	NV1 = PLACEMENT_LINK_NV0 + 1,
	NV2 = PLACEMENT_LINK_NV0 + 2,
	NV4 = PLACEMENT_LINK_NV0 + 4,
	NV6 = PLACEMENT_LINK_NV0 + 6,
	NV12 = PLACEMENT_LINK_NV0 + 12,
	NV18 = PLACEMENT_LINK_NV0 + 18,
	SYS = PLACEMENT_LINK_SYS,
	PROFILE_MAX = 8,        /* devices in the largest profile */
};

struct profile {
	const char *name;
	const char *model[2];           /* the product contains one of these... */
	const char *also;               /* ...and this, when set */
	unsigned count;                 /* nvidia.com/gpu.count, exactly */
	uint8_t all_pairs;              /* the level of every pair, or 0: see matrix */
	const uint8_t (*matrix)[PROFILE_MAX];
	int8_t numa[PROFILE_MAX];
};

/* Words that make a product label name something no profile describes. */
static const char *const excluded[] = { "PCIE", "NVL", "MIG" };

/* DGX-1 with Tesla V100 SXM2: the hybrid cube mesh of six NVLinks per GPU.
 * Every pair within GPUs 0-3, and within 4-7, is NVLinked (NV1 or NV2); GPU i
 * is also linked to GPU i+4 (NV2 for i = 0, 1; NV1 for i = 2, 3); the other
 * twelve pairs between the halves cross the sockets' QPI link (SYS).
 * Source: nvidia-smi topo -m on NERSC's Cori GPU nodes (8x V100-SXM2, the same
 * baseboard) and on the OneFlow DLPerf benchmark machines (8x Tesla
 * V100-SXM2-16GB), both public on GitHub, which agree cell for cell; NVIDIA's
 * "DGX-1 with Tesla V100 System Architecture" white paper draws the same mesh.
 * GPUs 0-3 hang off the first socket, 4-7 off the second (NUMA Affinity 0 and
 * 1 in the Cori output). */
static const uint8_t dgx1_v100[PROFILE_MAX][PROFILE_MAX] = {
	{ 0, NV1, NV1, NV2, NV2, SYS, SYS, SYS },
	{ NV1, 0, NV2, NV1, SYS, NV2, SYS, SYS },
	{ NV1, NV2, 0, NV2, SYS, SYS, NV1, SYS },
	{ NV2, NV1, NV2, 0, SYS, SYS, SYS, NV1 },
	{ NV2, SYS, SYS, SYS, 0, NV1, NV1, NV2 },
	{ SYS, NV2, SYS, SYS, NV1, 0, NV2, NV1 },
	{ SYS, SYS, NV1, SYS, NV1, NV2, 0, NV2 },
	{ SYS, SYS, SYS, NV1, NV2, NV1, NV2, 0 },
};

static const struct profile profiles[] = {
	{ "dgx1-v100", { "V100", NULL }, "SXM2", 8, 0, dgx1_v100,
	  { 0, 0, 0, 0, 1, 1, 1, 1 } },
	/* HGX A100 8-GPU (DGX A100 and the OEM boards built on it): each A100's
	 * twelve NVLinks go to six NVSwitches, so every pair is NV12. Source:
	 * nvidia-smi topo -m of a DGX A100 in NVIDIA/nccl issue 1505 (NV12
	 * everywhere; GPUs 0-3 on the first socket's NUMA nodes 3 and 1, GPUs 4-7
	 * on the second's, in NPS4 mode) and NVIDIA's A100 architecture white
	 * paper. */
	{ "hgx-a100-8", { "A100", NULL }, "SXM", 8, NV12, NULL,
	  { 0, 0, 0, 0, 1, 1, 1, 1 } },
	/* HGX A100 4-GPU (and DGX Station A100): no NVSwitch; the twelve NVLinks of
	 * each A100 go four to each of the three others, so every pair is NV4.
	 * Source: NVIDIA's HGX A100 4-GPU description in the A100 architecture
	 * white paper. Single- and dual-socket hosts both exist: NUMA unknown. */
	{ "hgx-a100-4", { "A100", NULL }, "SXM", 4, NV4, NULL,
	  { -1, -1, -1, -1, -1, -1, -1, -1 } },
	/* HGX H100 / H200 8-GPU (DGX H100, DGX H200): eighteen NVLinks per GPU to
	 * four NVSwitches, every pair NV18. GFD names the SXM part
	 * "NVIDIA-H100-80GB-HBM3" (no "SXM" in it) and the H200 "NVIDIA-H200".
	 * Source: nvidia-smi topo -m of DGX H100 machines in vllm-project/vllm
	 * issue 13855 and deepseek-ai/DeepEP issue 145 (NV18 everywhere, NUMA
	 * Affinity 0 for GPUs 0-3 and 1 for GPUs 4-7). */
	{ "hgx-h100-8", { "H100", "H200" }, NULL, 8, NV18, NULL,
	  { 0, 0, 0, 0, 1, 1, 1, 1 } },
	/* HGX H100 / H200 4-GPU: no NVSwitch; eighteen NVLinks per GPU, six to
	 * each of the three others: every pair NV6. Source: nvidia-smi topo -m of
	 * a 4x H100 machine in NVIDIA/nccl issue 1617 (NV6 everywhere, each GPU on
	 * its own NUMA node there: NUMA unknown here). */
	{ "hgx-h100-4", { "H100", "H200" }, NULL, 4, NV6, NULL,
	  { -1, -1, -1, -1, -1, -1, -1, -1 } },
};

/* Does <s> contain <word> (any case) at the start of a word, i.e. not right
 * after a letter or digit? */
static bool has_word(const char *s, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = s; *p; p++)
		if ((p == s || !isalnum((unsigned char)p[-1])) && strncasecmp(p, word, n) == 0)
			return true;
	return false;
}

static bool matches(const struct profile *pr, const char *product, unsigned count)
{
	if (count != pr->count)
		return false;
	if (!has_word(product, pr->model[0]) && !(pr->model[1] && has_word(product, pr->model[1])))
		return false;
	if (pr->also && !has_word(product, pr->also))
		return false;
	for (size_t i = 0; i < sizeof(excluded) / sizeof(excluded[0]); i++)
		if (has_word(product, excluded[i]))
			return false;
	return true;
}

int placement_topo_profile(const char *product, unsigned count, struct placement_topo *out)
{
	const struct profile *pr = NULL;
	int ret = -ENOENT;

	if (!product)
		goto out;
	for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]) && !pr; i++)
		if (matches(&profiles[i], product, count))
			pr = &profiles[i];
	if (!pr)
		goto out;
	memset(out, 0, sizeof(*out));
	out->n = (uint8_t)pr->count;
	out->known = true;
	snprintf(out->source, sizeof(out->source), "profile %s", pr->name);
	memset(out->numa, -1, sizeof(out->numa));
	for (unsigned i = 0; i < pr->count; i++) {
		out->numa[i] = pr->numa[i];
		for (unsigned j = 0; j < pr->count; j++)
			out->link[i][j] = i == j ? PLACEMENT_LINK_NONE :
				pr->matrix ? pr->matrix[i][j] : pr->all_pairs;
	}
	ret = 0;
out:
	return ret;
}

/* Devices past n are unknown too (NUMA -1), as placement_topo_parse writes
 * them, so that equal matrices are equal structs whatever their source. */
void placement_topo_unknown(unsigned n, struct placement_topo *out)
{
	memset(out, 0, sizeof(*out));
	out->n = (uint8_t)n;
	memset(out->numa, -1, sizeof(out->numa));
	snprintf(out->source, sizeof(out->source), "unknown");
}
