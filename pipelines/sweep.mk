# Shared sweep machinery, included by each experiment's Makefile after it
# sets POINTS (one name per sweep point), OUT, and the recipe of
# $(OUT)/points/%.csv (one point's CSV table, fctstats --format csv with
# the point's parameters as --param columns) and of $(GATHERED).
#
#   make -j N          runs the points N at a time on this machine
#   make SLURM=1       submits the points as one Slurm job array and the
#                      gather step as a job depending on all of them, and
#                      waits (sbatch must be on PATH; SBATCH_ARGS passes
#                      partition, account, time limits ...)
#
# Each point's table lands in $(OUT)/points/, the gathered table in
# $(GATHERED); both are plain files, so an interrupted sweep resumes where
# it stopped.

SLURM       ?=
SBATCH_ARGS ?=
POINT_CSVS  := $(POINTS:%=$(OUT)/points/%.csv)

ifeq ($(SLURM),)
all: $(GATHERED)
$(GATHERED): $(POINT_CSVS)
else
# The array's task i makes point i; the gather job runs once all succeed.
all:
	@mkdir -p $(OUT)/slurm
	@printf '%s\n' $(POINTS) >$(OUT)/slurm/points.txt
	@id=$$(sbatch --parsable --array=1-$(words $(POINTS)) --output=$(OUT)/slurm/point-%a.log $(SBATCH_ARGS) \
		--wrap 'p=$$(sed -n "$${SLURM_ARRAY_TASK_ID}p" $(OUT)/slurm/points.txt); $(MAKE) -C $(CURDIR) SLURM= $(OUT)/points/$$p.csv') && \
	echo "sweep: $(words $(POINTS)) points as Slurm array job $$id" && \
	sbatch --wait --dependency=afterok:$$id --output=$(OUT)/slurm/gather.log $(SBATCH_ARGS) \
		--wrap '$(MAKE) -C $(CURDIR) SLURM= $(GATHERED)' >/dev/null && \
	echo "sweep: gathered $(GATHERED)"
endif

clean:
	rm -rf $(OUT)

.PHONY: all clean
