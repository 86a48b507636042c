# tradeoff.gp - written by `attnlab report`; re-run with `gnuplot tradeoff.gp` in this directory.
if (!exists("out_png")) out_png = "tradeoff.png"
if (!exists("out_svg")) out_svg = "tradeoff.svg"
do for [fmt in "png svg"] {
  if (fmt eq "png") {
    set terminal pngcairo noenhanced size 1000,700 font ",11"
    set output out_png
  } else {
    set terminal svg noenhanced size 1000,700 dynamic font ",11"
    set output out_svg
  }
  set title "long_context_text: test loss against KV cache (mean over seeds, 95 % intervals)"
  set xlabel "KV-cache bytes per token (f32, all layers; log scale)"
  set ylabel "test loss (nats/token)"
  set logscale x 2
  set grid
  set key top right
  set offsets graph 0.08, graph 0.15, graph 0.08, graph 0.08
  set format x "%.0s %cB"
  plot "tradeoff.dat" using 1:($8 == 0 ? $2 : NaN):3 with yerrorbars pt 6 ps 1.6 lw 1.5 lc rgb "#1f5fa8" title "not resolved: within seed noise of a front point", \
       "" using 1:($8 == 1 ? $2 : NaN):3 with yerrorbars pt 7 ps 1.3 lw 1.5 lc rgb "#1f5fa8" title "resolved from its front neighbours", \
       "" using 1:($8 == 2 ? $2 : NaN):3 with yerrorbars pt 5 ps 1.2 lw 1.5 lc rgb "#1f5fa8" title "cheapest on the front (no cheaper point to resolve from)", \
       "" using 1:2:4 with labels left offset char 1,0.7 notitle, \
       "front.dat" using 1:2 with steps lw 2 dt 2 lc rgb "#c03030" title "Pareto front (means)"
  unset output
}
