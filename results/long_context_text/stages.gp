# stages.gp - written by `attnlab report`; re-run with `gnuplot stages.gp` in this directory.
if (!exists("out_png")) out_png = "stages.png"
if (!exists("out_svg")) out_svg = "stages.svg"
do for [fmt in "png svg"] {
  if (fmt eq "png") {
    set terminal pngcairo noenhanced size 1100,750 font ",11"
    set output out_png
  } else {
    set terminal svg noenhanced size 1100,750 dynamic font ",11"
    set output out_svg
  }
  set title "long_context_text: converted and uptrained models (val loss, mean over seeds, 95 % intervals)"
  set xlabel "KV-cache bytes per token (f32, all layers; log scale)"
  set ylabel "validation loss (nats/token)"
  set logscale x 2
  set grid
  set key top right
  set offsets graph 0.25, graph 0.3, graph 0.08, graph 0.08
  plot "stages.dat" index 3 using 1:2:3:4 with vectors nohead dt 3 lc rgb "#888888" notitle, \
       "" index 0 using 1:2:3 with yerrorbars pt 7 ps 1.4 lc rgb "#1f5fa8" title "trained from scratch", \
       "" index 0 using 1:2:4 with labels left offset char 1,0.8 notitle, \
       "" index 1 using 1:2:3 with yerrorbars pt 8 ps 1.4 lc rgb "#c03030" title "converted (step 0, before uptraining)", \
       "" index 1 using 1:($5 == 1 ? NaN : $2):4 with labels right offset char -1,0 notitle, \
       "" index 1 using 1:($5 == 1 ? $2 : NaN):4 with labels left offset char 1,0 notitle, \
       "" index 2 using 1:2:3 with yerrorbars pt 9 ps 1.4 lc rgb "#208040" title "uptrained", \
       "" index 2 using 1:($5 == 1 ? NaN : $2):4 with labels right offset char -1,0 font ",9" notitle, \
       "" index 2 using 1:($5 == 1 ? $2 : NaN):4 with labels left offset char 1,0 font ",9" notitle
  unset output
}
