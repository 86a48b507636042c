# eval_pareto_1024.gp - written by `attnlab report`; re-run with `gnuplot eval_pareto_1024.gp` in this directory.
if (!exists("out_png")) out_png = "eval_pareto_1024.png"
if (!exists("out_svg")) out_svg = "eval_pareto_1024.svg"
do for [fmt in "png svg"] {
  if (fmt eq "png") {
    set terminal pngcairo noenhanced size 1000,700 font ",11"
    set output out_png
  } else {
    set terminal svg noenhanced size 1000,700 dynamic font ",11"
    set output out_svg
  }
  set title "long_context_text: loss through the KV cache at context 1024 (mean over seeds)"
  set xlabel "KV-cache bytes of one 1024-token window (precision, scales and residual included; log scale)"
  set ylabel "loss (nats/token)"
  set logscale x 2
  set grid
  set key top right
  set offsets graph 0.08, graph 0.25, graph 0.08, graph 0.08
  plot "eval_pareto_1024.dat" index 0 using 1:2:3:5 with yerrorbars pt 7 ps 1.2 lc variable notitle, \
       "" index 0 using 1:2:4 with labels left offset char 1,0.6 font ",9" notitle, \
       "" index 1 using 1:2 with steps lw 2 dt 2 lc rgb "#c03030" title "Pareto front"
  unset output
}
