"""Studies layer: what is built from many solves -- multi-workload designs, the mapping
co-search, sensitivities, the chunk-count search and design-space scans."""
