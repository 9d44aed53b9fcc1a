/* What troupe-node publishes: the GPUs as the matrix `nvidia-smi topo -m`
 * prints, which troupe's cache reads from the troupe.io/gpu-topology
 * annotation (placement_topo_parse), and the UUID list.
 *
 * The matrix is tab-separated with the diagonal " X ", so it reads the same to
 * troupe and to a person running kubectl describe node. The CPU and NUMA
 * affinity columns are written only when some GPU has the figure, "N/A" for
 * the others, as nvidia-smi does.
 */
#include "node/node.h"

#include "common/strbuf.h"

void node_topo_render(const struct node_gpus *g, struct strbuf *out)
{
	bool cpus = false, numa = false;
	char name[PLACEMENT_LINK_NAME_BUF];

	for (unsigned i = 0; i < g->n; i++) {
		cpus |= g->gpu[i].cpus[0] != '\0';
		numa |= g->gpu[i].numa >= 0;
	}
	for (unsigned j = 0; j < g->n; j++)
		strbuf_printf(out, "\tGPU%u", j);
	strbuf_puts(out, cpus ? "\tCPU Affinity" : "");
	strbuf_puts(out, numa ? "\tNUMA Affinity\n" : "\n");
	for (unsigned i = 0; i < g->n; i++) {
		strbuf_printf(out, "GPU%u", i);
		for (unsigned j = 0; j < g->n; j++)
			strbuf_printf(out, "\t%s", i == j ? " X " :
				      placement_link_name(g->link[i][j], name, sizeof(name)));
		if (cpus)
			strbuf_printf(out, "\t%s", g->gpu[i].cpus[0] ? g->gpu[i].cpus : "N/A");
		if (numa) {
			if (g->gpu[i].numa >= 0)
				strbuf_printf(out, "\t%d", g->gpu[i].numa);
			else
				strbuf_puts(out, "\tN/A");
		}
		strbuf_putc(out, '\n');
	}
}

void node_uuids_render(const struct node_gpus *g, struct strbuf *out)
{
	for (unsigned i = 0; i < g->n; i++)
		if (!g->gpu[i].uuid[0])
			return;
	for (unsigned i = 0; i < g->n; i++) {
		if (i)
			strbuf_putc(out, ',');
		strbuf_puts(out, g->gpu[i].uuid);
	}
}
