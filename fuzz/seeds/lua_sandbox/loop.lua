local t = {}
for i, v in ipairs(state.items) do t[#t+1] = v * 2 end
return t
