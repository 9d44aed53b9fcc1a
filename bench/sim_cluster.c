/* sim_cluster: what the simulated nodes are. The four node types of the mix,
 * their link matrices written out here from the machines they stand for (no
 * parser, no profiles, so the simulation depends on nothing but placement),
 * and for each type the table of its largest free NVLink island by free mask,
 * which the replay reads at every arrival and sample instead of searching.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_placement.h"

static void link_set(struct placement_topo *t, unsigned i, unsigned j, uint8_t level)
{
	t->link[i][j] = level;
	t->link[j][i] = level;
}

static void topo_start(struct placement_topo *t, unsigned n, const char *source)
{
	memset(t, 0, sizeof(*t));
	t->n = (uint8_t)n;
	t->known = true;
	snprintf(t->source, sizeof(t->source), "%s", source);
	for (unsigned i = 0; i < PLACEMENT_TOPO_MAX; i++)
		t->numa[i] = -1;
}

/* Every pair on NV12 through NVSwitch (HGX A100/H100). */
static void topo_nvswitch(struct placement_topo *t)
{
	topo_start(t, 8, "sim nvswitch-8");
	for (unsigned i = 0; i < 8; i++) {
		t->numa[i] = (int8_t)(i / 4);
		for (unsigned j = i + 1; j < 8; j++)
			link_set(t, i, j, NV + 12);
	}
}

/* DGX-1 V100, as its `nvidia-smi topo -m` prints it: quads 0-3 and 4-7 fully
 * NVLinked with one or two links per pair, i and i+4 joined by one or two
 * links, every other pair across the SMP interconnect. Six links per GPU. */
static void topo_dgx1(struct placement_topo *t)
{
	static const uint8_t nv[8][8] = {
		{ 0, 1, 1, 2, 2, 0, 0, 0 }, { 1, 0, 2, 1, 0, 2, 0, 0 },
		{ 1, 2, 0, 2, 0, 0, 1, 0 }, { 2, 1, 2, 0, 0, 0, 0, 1 },
		{ 2, 0, 0, 0, 0, 1, 1, 2 }, { 0, 2, 0, 0, 1, 0, 2, 1 },
		{ 0, 0, 1, 0, 1, 2, 0, 2 }, { 0, 0, 0, 1, 2, 1, 2, 0 },
	};

	topo_start(t, 8, "sim dgx-1 v100");
	for (unsigned i = 0; i < 8; i++) {
		t->numa[i] = (int8_t)(i / 4);
		for (unsigned j = i + 1; j < 8; j++)
			link_set(t, i, j, nv[i][j] ? (uint8_t)(NV + nv[i][j]) : PLACEMENT_LINK_SYS);
	}
}

/* An 8-GPU PCIe server: pairs under one switch (PIX), switches of a socket
 * behind a host bridge's bridges (PXB), the two sockets across SYS. */
static void topo_pcie(struct placement_topo *t)
{
	topo_start(t, 8, "sim pcie-8");
	for (unsigned i = 0; i < 8; i++) {
		t->numa[i] = (int8_t)(i / 4);
		for (unsigned j = i + 1; j < 8; j++)
			link_set(t, i, j, i / 2 == j / 2   ? PLACEMENT_LINK_PIX
					  : i / 4 == j / 4 ? PLACEMENT_LINK_PXB
							   : PLACEMENT_LINK_SYS);
	}
}

/* A 4-GPU workstation: NVLink bridges (NV4) on 0-2 and 1-3, PHB otherwise. */
static void topo_bridge(struct placement_topo *t)
{
	topo_start(t, 4, "sim nvlink-bridge-4");
	for (unsigned i = 0; i < 4; i++) {
		t->numa[i] = 0;
		for (unsigned j = i + 1; j < 4; j++)
			link_set(t, i, j, j == i + 2 ? NV + 4 : PLACEMENT_LINK_PHB);
	}
}

/* Fill c->island from the type's link matrix, each mask from its subsets. */
static void class_islands(struct node_class *c)
{
	const struct placement_topo *t = c->topo;
	unsigned full = 1u << t->n;

	for (unsigned m = 0; m < full; m++) {
		bool clique = true;

		for (unsigned i = 0; i < t->n && clique; i++)
			for (unsigned j = i + 1; j < t->n && clique; j++)
				if ((m >> i & 1) && (m >> j & 1) &&
				    !placement_link_is_nvlink(t->link[i][j]))
					clique = false;
		if (clique) {
			c->island[m] = (uint8_t)__builtin_popcount(m);
			continue;
		}
		/* Subsets are smaller numbers: already known. */
		c->island[m] = 0;
		for (unsigned i = 0; i < t->n; i++)
			if ((m >> i & 1) && c->island[m & ~(1u << i)] > c->island[m])
				c->island[m] = c->island[m & ~(1u << i)];
	}
}

int sim_classes_init(struct node_class *c)
{
	static void (*const build[KINDS])(struct placement_topo *) = {
		topo_nvswitch, topo_dgx1, topo_pcie, topo_bridge,
	};
	static const char *const names[KINDS] = { "NVSwitch 8-GPU", "DGX-1 V100 8-GPU",
						  "PCIe 8-GPU", "NVLink-bridge 4-GPU" };

	for (unsigned k = 0; k < KINDS; k++) {
		c[k].name = names[k];
		c[k].topo = calloc(1, sizeof(*c[k].topo));
		if (!c[k].topo)
			return -ENOMEM;
		build[k](c[k].topo);
		class_islands(&c[k]);
	}
	return 0;
}
